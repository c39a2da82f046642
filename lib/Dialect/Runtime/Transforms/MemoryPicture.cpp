//===- MemoryPicture.cpp - the arena's live bytes as an SVG ---------------===//
//
// Kernels run along x in program order, live bytes up y in GB (10^9 bytes,
// as the memory reports count). A model has thousands of kernels and the
// picture a thousand pixels: each column shows the kernel of its range
// with the most live bytes, so the peak is drawn where it is, at its
// height.
//
//===----------------------------------------------------------------------===//

#include "MemoryPicture.h"
#include "SvgWriter.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>

using namespace mlir::fsdprt;
namespace plan = ::fsdp::plan;

int64_t MemoryPicture::Kernel::total() const {
  int64_t sum = 0;
  for (int64_t b : live)
    sum += b;
  return sum;
}

namespace {
/// One band of the stack: a name, its colour and the kinds it sums.
struct Layer {
  const char *name, *color;
  llvm::SmallVector<plan::BufferKind, 2> kinds;
};

const Layer kLayers[] = {
    {"parameters",
     "#4e79a7",
     {plan::BufferKind::Param, plan::BufferKind::ShardCopy}},
    {"optimizer",
     "#76b7b2",
     {plan::BufferKind::AdamM, plan::BufferKind::AdamV}},
    {"gradients", "#f28e2b", {plan::BufferKind::Grad}},
    {"inputs", "#9c755f", {plan::BufferKind::Input}},
    {"gathered", "#59a14f", {plan::BufferKind::Gathered}},
    {"activations", "#edc948", {plan::BufferKind::Activation}},
    {"scratch", "#b07aa1", {plan::BufferKind::Scratch}},
};
constexpr size_t kNumLayers = std::size(kLayers);
const char *const kOutsideColor = "#d4d4d4", *const kBudgetColor = "#d62728";

/// GB to three decimals, or three significant digits below 1 GB (a test
/// model's arena is a fraction of a megabyte).
std::string gbText(int64_t bytes) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format(
      bytes >= 1000000000 ? "%.3f GB" : "%.3g GB", double(bytes) / 1e9);
  return s;
}

/// The picture's geometry and the columns it draws.
class Chart {
public:
  Chart(const MemoryPicture &p, SvgWriter &svg);
  void drawAxes();
  void drawPhases();
  void drawAreas();
  void drawUnits();
  void drawMarkers();
  void drawLegend();

private:
  static constexpr double kWidth = 1000, kLeft = 80, kRight = 970, kTop = 70,
                          kBottom = 430;
  double x(double kernel) const {
    return kLeft + (kRight - kLeft) * kernel / double(std::max<size_t>(n, 1));
  }
  double y(double bytes) const {
    return kBottom - (kBottom - kTop) * bytes / top;
  }
  /// The layer's bytes at kernel `k`.
  int64_t layerBytes(size_t layer, size_t k) const;

  const MemoryPicture &p;
  SvgWriter &svg;
  size_t n;
  double top = 1, tick = 1; ///< the y axis' end and its step, in bytes
  /// Per column: its first kernel and the one it shows.
  std::vector<size_t> columnBegin, shown;
};
} // namespace

Chart::Chart(const MemoryPicture &p, SvgWriter &svg)
    : p(p), svg(svg), n(p.kernels.size()) {
  double most = double(std::max({p.peakBytes + p.outside, p.budget,
                                 p.arenaBytes + p.outside, int64_t(1)}));
  // A step of 1, 2 or 5 x 10^k bytes with at most 8 ticks below the top
  // (10 x 10^k always is: 10^k > most * 1.05 / 80).
  double step = std::pow(10.0, std::floor(std::log10(most * 1.05 / 8)));
  tick = 10 * step;
  for (double f : {5.0, 2.0, 1.0})
    if (most * 1.05 / (step * f) <= 8)
      tick = step * f;
  top = std::ceil(most * 1.05 / tick) * tick;
  size_t columns = std::min<size_t>(n, size_t(kRight - kLeft));
  for (size_t c = 0; c < columns; ++c) {
    size_t begin = c * n / columns, end = (c + 1) * n / columns, best = begin;
    for (size_t k = begin; k < end; ++k)
      if (p.kernels[k].total() > p.kernels[best].total())
        best = k;
    columnBegin.push_back(begin);
    shown.push_back(best);
  }
  columnBegin.push_back(n);
}

int64_t Chart::layerBytes(size_t layer, size_t k) const {
  if (layer == kNumLayers)
    return p.outside;
  int64_t sum = 0;
  for (plan::BufferKind kind : kLayers[layer].kinds)
    sum += p.kernels[k].live[uint32_t(kind)];
  return sum;
}

void Chart::drawAxes() {
  svg.text(kWidth / 2, 24,
           "Live memory per rank along the step, by kind (fsdp-plan-memory)",
           16, "middle");
  // As many decimals as the step needs: 0.0001 GB steps print 0.0003.
  int decimals = std::max(0, int(-std::floor(std::log10(tick / 1e9) + 1e-9)));
  for (double v = 0; v <= top + tick / 2; v += tick) {
    svg.line(kLeft, y(v), kRight, y(v), "#e6e6e6");
    std::string label;
    llvm::raw_string_ostream(label) << llvm::format("%.*f", decimals, v / 1e9);
    svg.text(kLeft - 6, y(v) + 4, label, 11, "end");
  }
  svg.line(kLeft, kBottom, kRight, kBottom, "#444");
  svg.line(kLeft, kTop, kLeft, kBottom, "#444");
  svg.text(24, (kTop + kBottom) / 2, "GB per rank (10^9 bytes)", 12, "middle",
           "#222", -90);
  svg.text((kLeft + kRight) / 2, kBottom + 36,
           "kernels of the step in program order (" + std::to_string(n) + ")",
           12, "middle");
}

void Chart::drawPhases() {
  struct Phase {
    const char *name;
    int64_t begin, end;
  };
  int64_t forwardEnd = p.forwardEnd < 0 ? int64_t(n) - 1 : p.forwardEnd;
  int64_t optimizer = p.optimizerBegin < 0 ? int64_t(n) : p.optimizerBegin;
  Phase phases[] = {{"forward", 0, forwardEnd + 1},
                    {"backward", forwardEnd + 1, optimizer},
                    {"optimizer", optimizer, int64_t(n)}};
  for (const Phase &phase : phases) {
    if (phase.end <= phase.begin)
      continue;
    double left = x(double(phase.begin)), right = x(double(phase.end));
    svg.rect(left, kTop - 22, right - left, 16,
             phase.begin == 0 ? "#eef3f9" : "#f6f0e9", "#bbbbbb");
    if (right - left > 40)
      svg.text((left + right) / 2, kTop - 10, phase.name, 11, "middle");
    if (phase.begin > 0)
      svg.line(left, kTop - 22, left, kBottom, "#555", 1.0, "4 3");
  }
}

void Chart::drawAreas() {
  std::vector<int64_t> below(shown.size(), 0);
  for (size_t layer = 0; layer <= kNumLayers; ++layer) {
    if (layer == kNumLayers && p.outside == 0)
      break;
    std::vector<std::pair<double, double>> points;
    std::vector<int64_t> above(below);
    for (size_t c = 0; c < shown.size(); ++c) {
      above[c] += layerBytes(layer, shown[c]);
      points.push_back({x(double(columnBegin[c])), y(double(above[c]))});
      points.push_back({x(double(columnBegin[c + 1])), y(double(above[c]))});
    }
    for (size_t c = shown.size(); c-- > 0;) {
      points.push_back({x(double(columnBegin[c + 1])), y(double(below[c]))});
      points.push_back({x(double(columnBegin[c])), y(double(below[c]))});
    }
    if (above != below)
      svg.polygon(points,
                  layer == kNumLayers ? kOutsideColor : kLayers[layer].color);
    below = above;
  }
}

void Chart::drawUnits() {
  // A boundary wherever the unit a kernel computes with changes, and its
  // name under the axis where there is room for it; not in the optimizer,
  // whose AdamW per unit would draw one line per kernel.
  double labelEnd = -1e9;
  size_t end = p.optimizerBegin < 0 ? n : size_t(p.optimizerBegin);
  for (size_t k = 0; k < end; ++k) {
    const std::string &unit = p.kernels[k].unit;
    if (unit.empty() || (k > 0 && unit == p.kernels[k - 1].unit))
      continue;
    double at = x(double(k));
    if (k > 0)
      svg.line(at, kTop, at, kBottom, "#ffffff", 0.6);
    std::string label = "@" + unit;
    if (at < labelEnd + 4)
      continue;
    svg.line(at, kBottom, at, kBottom + 4, "#444");
    svg.text(at + 1, kBottom + 13, label, 8, "start", "#333");
    labelEnd = at + 4.8 * double(label.size());
  }
}

void Chart::drawMarkers() {
  double peakX = x(double(p.peakKernel) + 0.5), peakY = y(double(p.peakBytes));
  svg.line(kLeft, peakY, kRight, peakY, "#222", 1.0, "2 3");
  svg.circle(peakX, peakY, 4, "#222");
  const MemoryPicture::Kernel &at = p.kernels[size_t(p.peakKernel)];
  std::string where = "kernel #" + std::to_string(p.peakKernel) + " " +
                      at.name + (at.unit.empty() ? "" : " @" + at.unit);
  bool right = peakX > (kLeft + kRight) / 2;
  svg.text(peakX + (right ? -8 : 8), peakY - 8,
           "peak " + gbText(p.peakBytes) + " (" + std::to_string(p.peakBytes) +
               " bytes), " + where,
           12, right ? "end" : "start");
  double arenaY = y(double(p.arenaBytes));
  svg.line(kLeft, arenaY, kRight, arenaY, "#777", 1.0, "1 2");
  svg.text(kRight, arenaY + 11, "arena " + gbText(p.arenaBytes), 10, "end",
           "#555");
  if (p.outside > 0) {
    double withY = y(double(p.peakBytes + p.outside));
    svg.text(kLeft + 4, withY - 3,
             "peak with the " + p.runtime + " runtime " +
                 gbText(p.peakBytes + p.outside),
             10, "start", "#555");
  }
  if (p.budget > 0) {
    double budgetY = y(double(p.budget));
    svg.line(kLeft, budgetY, kRight, budgetY, kBudgetColor, 2.0, "8 4");
    svg.text(kRight, budgetY - 5,
             "budget " + gbText(p.budget) + " (" + std::to_string(p.budget) +
                 " bytes)",
             12, "end", kBudgetColor);
  }
}

void Chart::drawLegend() {
  double at = kLeft, row = kBottom + 62;
  auto entry = [&](const std::string &name, const char *color) {
    svg.rect(at, row - 10, 12, 12, color);
    svg.text(at + 16, row, name, 11);
    at += 26 + 6.5 * double(name.size());
  };
  for (const Layer &layer : kLayers)
    entry(layer.name, layer.color);
  if (p.outside > 0)
    entry("outside the arena (" + p.runtime + ", predicted)", kOutsideColor);
}

void mlir::fsdprt::renderMemoryPicture(const MemoryPicture &picture,
                                       llvm::raw_ostream &os) {
  SvgWriter svg(os, 1000, 520);
  Chart chart(picture, svg);
  chart.drawAxes();
  chart.drawPhases();
  if (!picture.kernels.empty()) {
    chart.drawAreas();
    chart.drawUnits();
    chart.drawMarkers();
  }
  chart.drawLegend();
}
