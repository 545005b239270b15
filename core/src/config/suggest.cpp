#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "plugboard/config.hpp"

namespace plugboard {

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t subst = prev[j - 1] + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closestMatch(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t bestDistance = SIZE_MAX;
  for (const auto& c : candidates) {
    size_t d = editDistance(word, c);
    if (d < bestDistance) { bestDistance = d; best = c; }
  }
  // A likely typo: at most a third of the word wrong, and never more than 3 edits.
  size_t limit = std::min<size_t>(3, std::max<size_t>(1, word.size() / 3));
  return bestDistance <= limit ? best : std::string();
}

}  // namespace plugboard
