//===- SvgWriter.cpp - a small writer of standalone SVG -------------------===//

#include "SvgWriter.h"

#include "llvm/Support/Format.h"

using namespace mlir::fsdprt;

/// A coordinate to a tenth of a pixel: enough for a picture, and short.
static std::string num(double v) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.1f", v);
  if (s == "-0.0")
    s = "0.0";
  return s;
}

SvgWriter::SvgWriter(llvm::raw_ostream &os, double width, double height)
    : os(os) {
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width)
     << "\" height=\"" << num(height) << "\" viewBox=\"0 0 " << num(width)
     << " " << num(height)
     << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
  rect(0, 0, width, height, "#ffffff");
}

SvgWriter::~SvgWriter() { os << "</svg>\n"; }

std::string SvgWriter::escape(llvm::StringRef text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

void SvgWriter::rect(double x, double y, double w, double h,
                     llvm::StringRef fill, llvm::StringRef stroke) {
  os << "<rect x=\"" << num(x) << "\" y=\"" << num(y) << "\" width=\"" << num(w)
     << "\" height=\"" << num(h) << "\" fill=\"" << fill << "\" stroke=\""
     << stroke << "\"/>\n";
}

void SvgWriter::line(double x1, double y1, double x2, double y2,
                     llvm::StringRef stroke, double width,
                     llvm::StringRef dash) {
  os << "<line x1=\"" << num(x1) << "\" y1=\"" << num(y1) << "\" x2=\""
     << num(x2) << "\" y2=\"" << num(y2) << "\" stroke=\"" << stroke
     << "\" stroke-width=\"" << num(width) << "\"";
  if (!dash.empty())
    os << " stroke-dasharray=\"" << dash << "\"";
  os << "/>\n";
}

void SvgWriter::polygon(llvm::ArrayRef<std::pair<double, double>> points,
                        llvm::StringRef fill) {
  os << "<polygon fill=\"" << fill << "\" points=\"";
  for (auto [i, p] : llvm::enumerate(points))
    os << (i ? " " : "") << num(p.first) << "," << num(p.second);
  os << "\"/>\n";
}

void SvgWriter::circle(double x, double y, double r, llvm::StringRef fill) {
  os << "<circle cx=\"" << num(x) << "\" cy=\"" << num(y) << "\" r=\"" << num(r)
     << "\" fill=\"" << fill << "\"/>\n";
}

void SvgWriter::text(double x, double y, llvm::StringRef text, double size,
                     llvm::StringRef anchor, llvm::StringRef fill,
                     double rotate) {
  os << "<text x=\"" << num(x) << "\" y=\"" << num(y) << "\" font-size=\""
     << num(size) << "\" text-anchor=\"" << anchor << "\" fill=\"" << fill
     << "\"";
  if (rotate != 0.0)
    os << " transform=\"rotate(" << num(rotate) << " " << num(x) << " "
       << num(y) << ")\"";
  os << ">" << escape(text) << "</text>\n";
}
