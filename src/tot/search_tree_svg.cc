#include <algorithm>
#include <map>

#include "base/error.h"
#include "base/html_escape.h"
#include "tot/search_tree_writers.h"

namespace grove {
namespace {

// Geometry in pixels; text is monospace, about 0.6 em per character.
constexpr double kFontSize = 12;
constexpr double kCharWidth = 7.3;
constexpr double kLineHeight = 15;
constexpr double kPadding = 6;
constexpr double kGapX = 14;
constexpr double kGapY = 44;
constexpr double kMargin = 16;

std::string Px(double v) { return StrCat(static_cast<int64_t>(v + 0.5)); }

// Where each node's box goes: one row per depth, rows centred. Within a row, children follow
// their parents' order (then the order they were found), which keeps lines from crossing more
// than they must.
class TreeLayout {
 public:
  explicit TreeLayout(const SearchTree& tree) : tree_(tree) {
    std::size_t longest = 1;  // characters of the widest text
    for (const ThoughtNode& node : tree.nodes) {
      const auto depth = static_cast<std::size_t>(node.depth);
      if (rows_.size() <= depth) rows_.resize(depth + 1);
      longest =
          std::max({longest, ThoughtNodeTitle(node).size(), ThoughtNodeValueText(node).size()});
    }
    for (const ThoughtNode& node : tree.nodes) {
      rows_[static_cast<std::size_t>(node.depth)].push_back(node.id);
    }
    for (std::vector<int32_t>& row : rows_) {
      std::stable_sort(row.begin(), row.end(), [&](int32_t a, int32_t b) {
        const int32_t pa = tree.nodes[static_cast<std::size_t>(a)].parent;
        const int32_t pb = tree.nodes[static_cast<std::size_t>(b)].parent;
        return pa >= 0 && pb >= 0 && column_[pa] < column_[pb];
      });
      for (std::size_t i = 0; i < row.size(); ++i) column_[row[i]] = i;
    }
    std::size_t widest_row = 1;
    for (const std::vector<int32_t>& row : rows_) widest_row = std::max(widest_row, row.size());
    box_w_ = static_cast<double>(longest) * kCharWidth + 2 * kPadding;
    box_h_ = 2 * kLineHeight + 2 * kPadding;
    width_ = 2 * kMargin + static_cast<double>(widest_row) * (box_w_ + kGapX) - kGapX;
    const double legend_h = kLineHeight + kPadding;
    height_ = 2 * kMargin + static_cast<double>(rows_.size()) * (box_h_ + kGapY) - kGapY +
              legend_h + kPadding;
  }

  double box_w() const { return box_w_; }
  double box_h() const { return box_h_; }
  double width() const { return width_; }
  double height() const { return height_; }
  // The top-left corner of a node's box.
  double X(int32_t id) const {
    const std::size_t n = rows_[static_cast<std::size_t>(tree_.nodes[id].depth)].size();
    const double row_w = static_cast<double>(n) * (box_w_ + kGapX) - kGapX;
    return (width_ - row_w) / 2 + static_cast<double>(column_.at(id)) * (box_w_ + kGapX);
  }
  double Y(int32_t id) const {
    return kMargin + static_cast<double>(tree_.nodes[id].depth) * (box_h_ + kGapY);
  }

 private:
  const SearchTree& tree_;
  std::vector<std::vector<int32_t>> rows_;
  std::map<int32_t, std::size_t> column_;  // node -> index in its row
  double box_w_ = 0, box_h_ = 0, width_ = 0, height_ = 0;
};

// A node's box: green when kept, bold on the answer's path, its title and value.
void AppendNode(std::string& out, const ThoughtNode& node, const TreeLayout& at) {
  const double x = at.X(node.id), y = at.Y(node.id);
  const bool bold = node.on_answer_path;
  out += StrCat("<g><title>", HtmlEscape(StrCat("node ", node.id, ", depth ", node.depth)),
                "</title>\n");
  out += StrCat("<rect x=\"", Px(x), "\" y=\"", Px(y), "\" width=\"", Px(at.box_w()),
                "\" height=\"", Px(at.box_h()), "\" rx=\"4\" fill=\"",
                node.kept ? "#d4edda" : "#f4f4f4", "\" stroke=\"",
                node.kept ? "#2e7d32" : "#999999", "\" stroke-width=\"", bold ? 3 : 1, "\"/>\n");
  const std::string fill = node.kept ? "#000000" : "#666666";
  const std::string weight = bold ? " font-weight=\"bold\"" : "";
  out += StrCat("<text x=\"", Px(x + kPadding), "\" y=\"", Px(y + kPadding + kLineHeight - 3),
                "\" fill=\"", fill, "\"", weight, ">", HtmlEscape(ThoughtNodeTitle(node)),
                "</text>\n");
  const std::string value = ThoughtNodeValueText(node);
  if (!value.empty()) {
    out += StrCat("<text x=\"", Px(x + kPadding), "\" y=\"", Px(y + kPadding + 2 * kLineHeight - 3),
                  "\" fill=\"", fill, "\"", weight, ">", HtmlEscape(value), "</text>\n");
  }
  out += "</g>\n";
}

}  // namespace

std::string SearchTreeSvg(const SearchTree& tree) {
  if (tree.nodes.empty()) {
    return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\"></svg>\n";
  }
  const TreeLayout at(tree);
  std::string out =
      StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", Px(at.width()), "\" height=\"",
             Px(at.height()), "\" viewBox=\"0 0 ", Px(at.width()), " ", Px(at.height()),
             "\" font-family=\"monospace\" font-size=\"", kFontSize, "\">\n",
             "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
  // Lines first, so that boxes cover their ends.
  for (const ThoughtNode& node : tree.nodes) {
    if (node.parent < 0) continue;
    const bool bold = node.on_answer_path;
    out += StrCat("<line x1=\"", Px(at.X(node.parent) + at.box_w() / 2), "\" y1=\"",
                  Px(at.Y(node.parent) + at.box_h()), "\" x2=\"",
                  Px(at.X(node.id) + at.box_w() / 2), "\" y2=\"", Px(at.Y(node.id)), "\" stroke=\"",
                  bold ? "#000000" : "#aaaaaa", "\" stroke-width=\"", bold ? 3 : 1, "\"/>\n");
  }
  for (const ThoughtNode& node : tree.nodes) AppendNode(out, node, at);
  out += StrCat("<text x=\"", Px(kMargin), "\" y=\"", Px(at.height() - kMargin),
                "\" fill=\"#444444\">green: kept (the breadth best of a step); bold: the path to "
                "the answer</text>\n");
  out += "</svg>\n";
  return out;
}

}  // namespace grove
