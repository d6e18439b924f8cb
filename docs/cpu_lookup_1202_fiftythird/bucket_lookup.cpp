// Warm-cache cost of ModelRunner::smallest_bucket's lookups on this CPU: every size that holds the batch (up to
// ed1da14) against the first from the smallest (after), in a std::map of k = 0's 21 graphs and of k = 3's 189.
#include <chrono>
#include <compare>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <vector>
#include <algorithm>
struct Key { int64_t seqs, q, d = -1; auto operator<=>(const Key&) const = default; };
struct Captured { char payload[96]; };
int main() {
  std::vector<int64_t> sizes{1, 2, 4, 8, 16, 24};
  for (int64_t s = 32; s < 256; s += 16) sizes.push_back(s);
  sizes.push_back(256);
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  for (int k : {0, 3}) {
    std::map<Key, Captured> g;
    for (int64_t s : sizes) {
      for (int64_t q = 1; q <= k + 1; ++q) g[{s, q}];
      for (int64_t r = 0; r < k; ++r) g[{s, k + 1, r}];
      for (int64_t r = 1; r < k; ++r) g[{s, 0, r}];
    }
    for (int64_t seqs : {1, 8, 64}) {
      const int n = 200000;
      int64_t sink = 0;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i) {
        std::optional<int64_t> best;
        for (int64_t size : sizes) if (size >= seqs && g.contains({size, 1, -1})) best = size;
        sink += *best;
      }
      auto t1 = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i) {
        for (auto size = sizes.rbegin(); size != sizes.rend(); ++size)
          if (*size >= seqs && g.contains({*size, 1, -1})) { sink += *size; break; }
      }
      auto t2 = std::chrono::steady_clock::now();
      std::printf("k = %d (%zu graphs), batch %3ld: every size %.3f us, first from the smallest %.3f us (%ld)\n", k,
                  g.size(), (long)seqs, std::chrono::duration<double, std::micro>(t1 - t0).count() / n,
                  std::chrono::duration<double, std::micro>(t2 - t1).count() / n, (long)(sink % 7));
    }
  }
}
