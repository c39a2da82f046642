//===- SvgWriter.h - a small writer of standalone SVG -----------*- C++ -*-===//
//
// The few SVG elements our pictures need (rectangles, lines, polygons,
// circles, text), written as text with coordinates to a tenth of a pixel
// and text escaped for XML. No library: a picture is a few hundred
// elements, and a writer we own keeps the output byte for byte stable.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_DIALECT_RUNTIME_TRANSFORMS_SVGWRITER_H
#define FSDP_LIB_DIALECT_RUNTIME_TRANSFORMS_SVGWRITER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <utility>

namespace mlir::fsdprt {

class SvgWriter {
public:
  /// Starts a `width` x `height` picture with a white background.
  SvgWriter(llvm::raw_ostream &os, double width, double height);
  /// Closes the picture.
  ~SvgWriter();

  void rect(double x, double y, double w, double h, llvm::StringRef fill,
            llvm::StringRef stroke = "none");
  /// A line; `dash` is an SVG stroke-dasharray ("" for a solid line).
  void line(double x1, double y1, double x2, double y2, llvm::StringRef stroke,
            double width = 1.0, llvm::StringRef dash = "");
  void polygon(llvm::ArrayRef<std::pair<double, double>> points,
               llvm::StringRef fill);
  void circle(double x, double y, double r, llvm::StringRef fill);
  /// Text at (x, y); `anchor` is start, middle or end; `rotate` turns it
  /// by degrees about (x, y).
  void text(double x, double y, llvm::StringRef text, double size = 12,
            llvm::StringRef anchor = "start", llvm::StringRef fill = "#222",
            double rotate = 0.0);

  /// `text` with &, <, > and " escaped.
  static std::string escape(llvm::StringRef text);

private:
  llvm::raw_ostream &os;
};

} // namespace mlir::fsdprt

#endif // FSDP_LIB_DIALECT_RUNTIME_TRANSFORMS_SVGWRITER_H
