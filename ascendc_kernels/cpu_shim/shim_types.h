#pragma once
// Scalar types of the Ascend C API on the CPU: half and bfloat16_t stored as 16-bit patterns and
// converted from float with round-to-nearest-even, as the AI core's conversions (and Cast with
// RoundMode::CAST_RINT) do, so the shim's rounding matches the chip's bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace AscendC::shim {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_bf16_rne(float f) {
  uint32_t u = float_bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep it a quiet NaN
  u += 0x7fff + ((u >> 16) & 1);  // ties go to the even mantissa
  return static_cast<uint16_t>(u >> 16);
}

inline uint16_t float_to_fp16_rne(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000;
  const uint32_t abs = u & 0x7fffffff;
  if (abs > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);            // NaN
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);           // rounds past 65504: inf
  if (abs < 0x38800000) {                                                       // fp16 subnormal or zero
    if (abs < 0x33000000) return static_cast<uint16_t>(sign);                   // below half the smallest
    const int shift = 126 - static_cast<int>(abs >> 23);                        // 14 .. 24
    const uint32_t mant = (abs & 0x7fffff) | 0x800000;
    const uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    return static_cast<uint16_t>(sign | (q + (rem > half || (rem == half && (q & 1)))));
  }
  const uint32_t r = abs + 0xfff + ((abs >> 13) & 1) - 0x38000000;  // rebias 127 -> 15, round to even
  return static_cast<uint16_t>(sign | (r >> 13));
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) return (sign ? -1.0f : 1.0f) * std::ldexp(static_cast<float>(mant), -24);
  if (exp == 31) return bits_float(sign | 0x7f800000 | (mant << 13));
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

}  // namespace AscendC::shim

// The API's 16-bit float types live in the global namespace, as in a CANN build.
struct half {
  uint16_t bits = 0;
  half() = default;
  half(float f) : bits(AscendC::shim::float_to_fp16_rne(f)) {}
  operator float() const { return AscendC::shim::fp16_to_float(bits); }
};

struct bfloat16_t {
  uint16_t bits = 0;
  bfloat16_t() = default;
  bfloat16_t(float f) : bits(AscendC::shim::float_to_bf16_rne(f)) {}
  operator float() const { return AscendC::shim::bits_float(static_cast<uint32_t>(bits) << 16); }
};

static_assert(sizeof(half) == 2 && sizeof(bfloat16_t) == 2, "16-bit storage like the chip's");
