//===- CommandLine.cpp - the option values every runtime tool checks ------===//

#include "fsdp/runtime/support/CommandLine.h"

#include <exception>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace fsdp::rt {

std::string optionValueError(const std::string &flag, const char *text) {
  if (!text)
    return flag + " needs a value";
  if (!*text)
    return flag + " expects a value, got an empty one";
  return "";
}

bool parseIntegerOption(const std::string &flag, const char *text, int64_t min,
                        int64_t max, int64_t &value, std::string &error) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (!errno && end != text && !*end && v >= min && v <= max) {
    value = v;
    return true;
  }
  error = flag + " expects an integer " +
          (max == INT64_MAX ? ">= " + std::to_string(min)
                            : "in [" + std::to_string(min) + ", " +
                                  std::to_string(max) + "]") +
          ", got '" + text + "'";
  return false;
}

bool parseNumberOption(const std::string &flag, const char *text, double min,
                       double max, double &value, std::string &error,
                       const char *what) {
  char *end = nullptr;
  double v = std::strtod(text, &end);
  if (end != text && !*end && std::isfinite(v) && v >= min && v <= max) {
    value = v;
    return true;
  }
  char range[64];
  std::snprintf(range, sizeof(range), "in [%g, %g]", min, max);
  error = flag + " expects " + what + " " + range + ", got '" + text + "'";
  return false;
}

bool ToolArguments::next() {
  if (++i >= argc)
    return false;
  current = argv[i];
  return true;
}

void ToolArguments::answerHelp() const {
  if (current != "--help" && current != "-h")
    return;
  std::fputs(usage, stdout);
  std::exit(0);
}

std::string ToolArguments::value() {
  const char *text = i + 1 < argc ? argv[i + 1] : nullptr;
  std::string why = optionValueError(current, text);
  if (!why.empty())
    fail(why, 2);
  ++i;
  return text;
}

int64_t ToolArguments::integer(int64_t min, int64_t max) {
  std::string text = value(), error;
  int64_t v = 0;
  if (!parseIntegerOption(current, text.c_str(), min, max, v, error))
    fail(error, 2);
  return v;
}

double ToolArguments::number(double min, double max, const char *what) {
  std::string text = value(), error;
  double v = 0;
  if (!parseNumberOption(current, text.c_str(), min, max, v, error, what))
    fail(error, 2);
  return v;
}

void ToolArguments::unknown() const {
  fail("unknown option '" + current + "'\n" + usage, 2);
  std::exit(2); // fail does not return
}

int runTool(int (*run)(int argc, char **argv), int argc, char **argv,
            ToolArguments::Fail fail) {
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    fail(std::string("unexpected error: ") + e.what(), 1);
    return 1; // fail does not return
  }
}

} // namespace fsdp::rt
