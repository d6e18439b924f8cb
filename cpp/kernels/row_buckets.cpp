#include "kernels/row_buckets.h"

#include <bit>

namespace mtpserve::kernels {

int64_t round_up_rows(int64_t rows) {
  if (rows <= 0) return rows;
  const int octave = std::bit_width(static_cast<uint64_t>(rows)) - 1;  // 2^octave <= rows < 2^(octave + 1)
  const int64_t step = octave > 7 ? int64_t{1} << (octave - 4) : 8;
  return (rows + step - 1) / step * step;
}

}  // namespace mtpserve::kernels
