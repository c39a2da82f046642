//===- CommandLine.h - the option values every runtime tool checks --------===//
//
// What fsdp-run, fsdp-gradcheck, fsdp-step-check and the benchmarks check
// of an option's value, the same way: it is there and not empty (an unset
// shell variable is not "no option"), and a number is whole, finite and
// within its range. Each tool reports a refusal on its own error line,
// exit code 2; `--help` prints its usage on stdout, exit code 0.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNTIME_COMMANDLINE_H
#define FSDP_RUNTIME_COMMANDLINE_H

#include <cstdint>
#include <string>

namespace fsdp::rt {

/// Why option `flag`'s value `text` (null: none left on the command line)
/// is refused, "" when there is one: "--resume needs a value", "--resume
/// expects a value, got an empty one".
std::string optionValueError(const std::string &flag, const char *text);

/// `text` as an integer in [min, max]: false, `error` naming `flag` and
/// the range ("--steps expects an integer >= 1, got '0'"), otherwise.
bool parseIntegerOption(const std::string &flag, const char *text, int64_t min,
                        int64_t max, int64_t &value, std::string &error);

/// `text` as a finite number in [min, max]: false, `error` naming `flag`,
/// `what` ("a number", "seconds") and the range, otherwise ("--lr expects
/// a number in [0, 10], got 'inf'").
bool parseNumberOption(const std::string &flag, const char *text, double min,
                       double max, double &value, std::string &error,
                       const char *what = "a number");

/// One small tool's command line, an argument at a time: the value checks
/// above, and `fail` (the tool's error line and exit, never returning)
/// on a refusal.
class ToolArguments {
public:
  using Fail = void (*)(const std::string &message, int code);
  ToolArguments(int argc, char **argv, const char *usage, Fail fail)
      : argc(argc), argv(argv), usage(usage), fail(fail) {}
  /// Moves to the next argument; false after the last.
  bool next();
  const std::string &arg() const { return current; }
  /// Prints the usage on stdout and exits 0 when the argument is --help
  /// or -h.
  void answerHelp() const;
  /// The current option's value: the next argument, never empty.
  std::string value();
  int64_t integer(int64_t min, int64_t max);
  double number(double min, double max, const char *what = "a number");
  /// Ends the run: an unknown option, the usage after it.
  [[noreturn]] void unknown() const;

private:
  int argc;
  char **argv;
  const char *usage;
  Fail fail;
  int i = 0;
  std::string current;
};

/// A small tool's main: `run`'s exit code. Nothing should throw; what
/// does (a size too large to allocate) is `fail`'s error line
/// ("unexpected error: ...") and exit code 1, never an abort.
int runTool(int (*run)(int argc, char **argv), int argc, char **argv,
            ToolArguments::Fail fail);

} // namespace fsdp::rt

#endif
