// ModelRunner::smallest_bucket as it was up to ed1da14 and as it is after: the same answer on random batch-size
// plans, graph sets and queries (g++ -std=c++20 -O1 bucket_equal.cpp -o eq && ./eq).
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <tuple>
#include <vector>
#include <algorithm>
using Key = std::tuple<int64_t, int64_t, int64_t>;
std::optional<int64_t> old_way(const std::vector<int64_t>& sizes, const std::set<Key>& g, int64_t seqs, int64_t q, int64_t d) {
  std::optional<int64_t> best;
  for (int64_t size : sizes) if (size >= seqs && g.contains({size, q, d})) best = size;
  return best;
}
std::optional<int64_t> new_way(const std::vector<int64_t>& sizes, const std::set<Key>& g, int64_t seqs, int64_t q, int64_t d) {
  for (auto size = sizes.rbegin(); size != sizes.rend(); ++size)
    if (*size >= seqs && g.contains({*size, q, d})) return *size;
  return std::nullopt;
}
int main() {
  std::mt19937 rng(1);
  long checked = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<int64_t> sizes;
    int64_t most = 1 + rng() % 300;
    for (int64_t s : {1, 2, 4, 8, 16, 24}) if (s < most) sizes.push_back(s);
    for (int64_t s = 32; s < most; s += 16) sizes.push_back(s);
    sizes.push_back(most);
    std::sort(sizes.begin(), sizes.end(), std::greater<>());
    std::set<Key> g;
    for (int64_t s : sizes) for (int64_t q = -1; q <= 4; ++q) for (int64_t d = -1; d <= 3; ++d) if (rng() % 3) g.insert({s, q, d});
    for (int i = 0; i < 50; ++i) {
      int64_t seqs = rng() % 320, q = int64_t(rng() % 6) - 1, d = int64_t(rng() % 5) - 1;
      if (old_way(sizes, g, seqs, q, d) != new_way(sizes, g, seqs, q, d)) { std::printf("MISMATCH\n"); return 1; }
      ++checked;
    }
  }
  std::printf("equal on %ld queries\n", checked);
}
