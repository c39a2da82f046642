//===- fsdp-tblgen.cpp - the kernel table from the ops' ODS ---------------===//
//
// A TableGen backend, as IREE's VMOpTableGen: it reads the fsdp dialect's
// ODS (FSDPOps.td, which includes the kernel records of FSDPKernels.td)
// and writes what the runtime and the tests restated by hand before:
//
//   -gen-kernel-table      runtime/include/fsdp/runtime/KernelTable.inc:
//                          plan::Opcode's enumerators, kKernels' entries
//                          and KernelDispatch.h's name lists
//   -gen-kernel-decls      runtime/include/fsdp/runtime/KernelDecls.inc:
//                          the CPU and CUDA backends' declarations of the
//                          kernels runCompute calls, from their `call`
//   -gen-kernel-opcodes-py test/Runtime/Inputs/plan_opcodes.py (OPCODES)
//   -gen-kernel-table-doc  the kernel table of docs/plan-format.md
//
// The outputs are checked in (the runtime builds without MLIR); CTests
// diff them against a fresh generation. Before writing anything it checks
// the table (opcodes 0..N-1, unique names, inputs before outputs, results
// before scratch) and every fsdp op that names a kernel against it: the
// kernel is named after the op, its inputs are the op's operands (names,
// optional ones last, token ids where the op takes FSDP_IdTensor), its
// results the op's results. A parameter without an explicit rule takes
// the default of the op's DefaultValuedAttr of its name.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/KernelShapes.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/TableGen/Error.h"
#include "llvm/TableGen/Main.h"
#include "llvm/TableGen/Record.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace llvm;

namespace {
enum Action { GenTable, GenDecls, GenOpcodesPy, GenDoc };
cl::opt<Action>
    action(cl::desc("what to generate"),
           cl::values(clEnumValN(GenTable, "gen-kernel-table",
                                 "the runtime's opcode enum and kernel table"),
                      clEnumValN(GenDecls, "gen-kernel-decls",
                                 "the backends' kernel declarations"),
                      clEnumValN(GenOpcodesPy, "gen-kernel-opcodes-py",
                                 "plan_tool.py's OPCODES"),
                      clEnumValN(GenDoc, "gen-kernel-table-doc",
                                 "plan-format.md's kernel table")));

struct Operand {
  std::string name, rule, role;
  bool optional = false;
};
struct Param {
  std::string name, type, sameAs, value; ///< value: the default, if any
};
/// A shape rule: operand `operand` (its name) has shape `pattern`.
struct ShapeRule {
  std::string operand, pattern;
};
struct Kernel {
  const Record *def = nullptr;
  int64_t opcode = 0;
  std::string enumerator, name, dispatch, notes, derive, extraCheck, call;
  bool gemm = false, byHand = false, boundByHand = false;
  std::vector<Operand> ins, outs;
  std::vector<Param> params;
  std::vector<ShapeRule> shapes;
  std::vector<std::string> dimChecks;
};

std::vector<Operand> readOperands(const Record *def, StringRef field) {
  std::vector<Operand> operands;
  const DagInit *dag = def->getValueAsDag(field);
  for (unsigned i = 0; i < dag->getNumArgs(); ++i) {
    const auto *arg = dyn_cast<DefInit>(dag->getArg(i));
    if (!arg || !arg->getDef()->isSubClassOf("FSDP_KernelOperand"))
      PrintFatalError(def, "operand " + Twine(i) + " of '" + field +
                               "' is no FSDP_KernelOperand");
    const Record *rec = arg->getDef();
    operands.push_back(
        {dag->getArgNameStr(i).str(), rec->getValueAsString("rule").str(),
         rec->getValueAsString("role").str(), rec->getValueAsBit("optional")});
  }
  return operands;
}

Kernel readKernel(const Record *def) {
  Kernel k;
  k.def = def;
  k.opcode = def->getValueAsInt("opcode");
  k.enumerator = def->getValueAsString("enumerator").str();
  k.name = def->getValueAsString("name").str();
  k.dispatch = def->getValueAsString("dispatch").str();
  k.notes = def->getValueAsString("notes").str();
  k.gemm = def->getValueAsBit("gemm");
  k.byHand = def->getValueAsBit("byHand");
  k.ins = readOperands(def, "ins");
  k.outs = readOperands(def, "outs");
  k.derive = def->getValueAsString("derive").str();
  k.extraCheck = def->getValueAsString("extraCheck").str();
  k.call = def->getValueAsString("call").str();
  k.boundByHand = def->getValueAsBit("boundByHand");
  for (StringRef rule : def->getValueAsListOfStrings("shapes")) {
    auto [operand, pattern] = rule.split(':');
    if (pattern.empty())
      PrintFatalError(def,
                      "shape rule '" + rule + "' is not \"operand: pattern\"");
    k.shapes.push_back({operand.trim().str(), pattern.trim().str()});
  }
  for (StringRef check : def->getValueAsListOfStrings("dimChecks"))
    k.dimChecks.push_back(check.trim().str());
  const DagInit *params = def->getValueAsDag("kernelParams");
  for (unsigned i = 0; i < params->getNumArgs(); ++i) {
    const Record *rec = cast<DefInit>(params->getArg(i))->getDef();
    k.params.push_back({params->getArgNameStr(i).str(),
                        rec->getValueAsString("type").str(),
                        rec->getValueAsString("sameAs").str(),
                        {}});
  }
  return k;
}

/// What the runtime assumes of the table (PlanFormat.h's isWellFormed
/// checks the generated one again at compile time).
void checkKernel(const Kernel &k, size_t index) {
  if (k.opcode != int64_t(index))
    PrintFatalError(k.def, "kernel '" + k.name + "' has opcode " +
                               Twine(k.opcode) + ", expected " + Twine(index) +
                               " (opcodes are 0..N-1)");
  for (const auto *list : {&k.ins, &k.outs}) // optional ones last in each
    for (size_t i = 1; i < list->size(); ++i)
      if ((*list)[i - 1].optional && !(*list)[i].optional)
        PrintFatalError(k.def, "optional operands come last");
  for (const Operand &in : k.ins)
    if (in.role != "Input")
      PrintFatalError(k.def, "input '" + in.name + "' is not read");
  bool scratch = false;
  for (const Operand &out : k.outs) {
    if (out.role == "Input" || out.rule == "TokenIds")
      PrintFatalError(k.def, "output '" + out.name + "' is not written");
    if (out.rule == "Indices" && out.role != "Result")
      PrintFatalError(k.def, "output '" + out.name +
                                 "' holds indices but is no result");
    if (scratch && out.role != "Scratch")
      PrintFatalError(k.def, "scratch outputs come after the results");
    scratch |= out.role == "Scratch";
  }
  for (const Param &p : k.params)
    if (!p.sameAs.empty() && llvm::none_of(k.params, [&](const Param &q) {
          return q.name == p.sameAs;
        }))
      PrintFatalError(k.def, "parameter '" + p.name + "' defaults to '" +
                                 p.sameAs + "', which the kernel lacks");
}

/// shapes::Derive's enumerator for `derive` ("" for None).
std::optional<fsdp::plan::shapes::Derive> deriveOf(StringRef derive) {
  return fsdp::plan::shapes::deriveNamed(
      std::string_view(derive.data(), derive.size()));
}

/// The flat operand index of `name` (input i: i, output j: kMaxInputs +
/// j), or -1.
int operandIndex(const Kernel &k, StringRef name) {
  for (size_t i = 0; i < k.ins.size(); ++i)
    if (k.ins[i].name == name)
      return int(i);
  for (size_t j = 0; j < k.outs.size(); ++j)
    if (k.outs[j].name == name)
      return int(fsdp::plan::shapes::kMaxInputs + j);
  return -1;
}

/// The shape rules: each names an operand of the kernel once, parses, and
/// every dim a check names is one that a pattern or the derivation binds.
void checkShapeRules(const Kernel &k) {
  namespace shapes = fsdp::plan::shapes;
  auto fail = [&](const Twine &what) {
    PrintFatalError(k.def, "kernel '" + k.name + "': " + what);
  };
  std::optional<shapes::Derive> derive = deriveOf(k.derive);
  if (!derive)
    fail("unknown derive '" + k.derive + "' (shapes::Derive)");
  if (k.shapes.size() > shapes::kMaxRules ||
      k.dimChecks.size() > shapes::kMaxChecks)
    fail("more shape rules or dim checks than KernelShapes.h holds");
  std::set<std::string> operands, dims;
  for (std::string_view d : shapes::derivedDims(*derive))
    if (!d.empty())
      dims.insert(std::string(d));
  for (const ShapeRule &rule : k.shapes) {
    if (operandIndex(k, rule.operand) < 0)
      fail("a shape pattern for '" + rule.operand + "', which it lacks");
    if (!operands.insert(rule.operand).second)
      fail("two shape patterns for '" + rule.operand + "'");
    if (!shapes::wellFormed(rule.pattern, /*check=*/false))
      fail("malformed shape pattern '" + rule.pattern + "'");
    shapes::forEachDim(
        rule.pattern, [&](std::string_view d) { dims.insert(std::string(d)); });
  }
  for (const std::string &check : k.dimChecks) {
    if (!shapes::wellFormed(check, /*check=*/true))
      fail("malformed dim check '" + check + "'");
    shapes::forEachDim(check, [&](std::string_view d) {
      if (!dims.count(std::string(d)))
        fail("dim check '" + check + "' names '" + std::string(d) +
             "', which no shape pattern binds");
    });
  }
  if (k.derive == "AttentionHeads" || k.derive == "RopeHeads" ||
      k.derive == "QkNormHeads")
    if (!dims.count("W") || llvm::none_of(k.params, [](const Param &p) {
          return p.name == "heads";
        }))
      fail("derive '" + k.derive +
           "' needs qkv's width W and a parameter 'heads'");
}

/// The dims a kernel's shape rules and derivation bind.
std::set<std::string> boundDims(const Kernel &k) {
  namespace shapes = fsdp::plan::shapes;
  std::set<std::string> dims;
  if (std::optional<shapes::Derive> derive = deriveOf(k.derive))
    for (std::string_view d : shapes::derivedDims(*derive))
      if (!d.empty())
        dims.insert(std::string(d));
  for (const ShapeRule &rule : k.shapes)
    shapes::forEachDim(
        rule.pattern, [&](std::string_view d) { dims.insert(std::string(d)); });
  return dims;
}

/// One argument of a `call` as KernelDispatch.h's runCompute spells it
/// (its KernelArgs `a`).
std::string callArgument(const Kernel &k, StringRef arg,
                         const std::set<std::string> &dims) {
  std::string written = arg.str(); // before the prefixes are consumed
  auto fail = [&](const Twine &what) {
    PrintFatalError(k.def, "kernel '" + k.name + "': call argument '" +
                               written + "' " + what);
  };
  auto param = [&](StringRef name) -> const Param * {
    for (const Param &p : k.params)
      if (p.name == name)
        return &p;
    return nullptr;
  };
  if (arg.consume_front("$")) {
    int index = operandIndex(k, arg);
    if (index < 0)
      fail("names an operand the kernel lacks");
    bool output = index >= int(fsdp::plan::shapes::kMaxInputs);
    const Operand &o =
        output ? k.outs[index - fsdp::plan::shapes::kMaxInputs] : k.ins[index];
    size_t at = output ? index - fsdp::plan::shapes::kMaxInputs : index;
    std::string f = o.rule == "TokenIds"  ? "ids"
                    : o.rule == "Indices" ? (output ? "idxOut" : "idx")
                    : o.rule == "F32"     ? (output ? "SO" : "SI")
                                          : (output ? "O" : "I");
    if (o.optional)
      f = "opt" + f;
    return "a." + f + "(" + std::to_string(at) + ")";
  }
  if (arg == "null")
    return "static_cast<T *>(nullptr)";
  if (!arg.empty() && llvm::all_of(arg, llvm::isDigit))
    return "int64_t(" + arg.str() + ")";
  if (arg.consume_front("double(") && arg.consume_back(")")) {
    if (!param(arg))
      fail("is no parameter of the kernel");
    return "a.param(\"" + arg.str() + "\")";
  }
  if (const Param *p = param(arg))
    return std::string(p->type == "f32"   ? "float"
                       : p->type == "f64" ? "double"
                                          : "int64_t") +
           "(a.param(\"" + arg.str() + "\"))";
  if (!dims.count(arg.str()))
    fail("is neither a dim of its shape rules nor a parameter");
  return "a.dim(\"" + arg.str() + "\")";
}

/// The op's operands and attributes, from its `arguments` dag.
struct OpArgs {
  std::vector<std::pair<std::string, const Record *>> operands, attrs;
};
OpArgs readOpArgs(const Record *op) {
  OpArgs args;
  const DagInit *dag = op->getValueAsDag("arguments");
  for (unsigned i = 0; i < dag->getNumArgs(); ++i) {
    const Record *rec = cast<DefInit>(dag->getArg(i))->getDef();
    auto entry = std::make_pair(dag->getArgNameStr(i).str(), rec);
    (rec->isSubClassOf("Attr") ? args.attrs : args.operands).push_back(entry);
  }
  return args;
}

/// Checks the kernel's inputs against the op's operands.
void checkOperands(const Record *op, const OpArgs &args, const Kernel &k) {
  auto fail = [&](const Twine &what) {
    PrintFatalError(op, "op '" + op->getValueAsString("opName") +
                            "' and kernel '" + k.name + "' disagree: " + what +
                            " (FSDPKernels.td)");
  };
  if (args.operands.size() != k.ins.size())
    fail("the op has " + Twine(args.operands.size()) +
         " operands, the kernel " + Twine(k.ins.size()) + " inputs");
  for (size_t i = 0; i < k.ins.size(); ++i) {
    const auto &[name, constraint] = args.operands[i];
    const Operand &in = k.ins[i];
    if (name != in.name)
      fail("operand #" + Twine(i) + " is '" + name + "', input '" + in.name +
           "'");
    if (constraint->isSubClassOf("Optional") != in.optional)
      fail("'" + name + "' is optional in one of them only");
    bool ids = constraint->getName() == "FSDP_IdTensor";
    if (ids != (in.rule == "TokenIds"))
      fail("'" + name + "' holds token ids in one of them only");
    bool indices = constraint->getName() == "FSDP_IndexTensor";
    if (indices != (in.rule == "Indices"))
      fail("'" + name + "' holds indices in one of them only");
  }
  const DagInit *results = op->getValueAsDag("results");
  size_t kernelResults = llvm::count_if(
      k.outs, [](const Operand &o) { return o.role == "Result"; });
  if (results->getNumArgs() != kernelResults)
    fail("the op has " + Twine(results->getNumArgs()) +
         " results, the kernel " + Twine(kernelResults));
  for (size_t i = 0; i < kernelResults; ++i) {
    const Record *rec = cast<DefInit>(results->getArg(i))->getDef();
    if ((rec->getName() == "FSDP_IndexTensor") != (k.outs[i].rule == "Indices"))
      fail("result '" + results->getArgNameStr(i).str() +
           "' holds indices in one of them only");
  }
}

/// Takes the op's attribute defaults for the kernel's parameters.
void takeDefaults(const OpArgs &args, Kernel &k) {
  for (Param &p : k.params)
    for (const auto &[name, attr] : args.attrs) {
      if (name != p.name)
        continue;
      std::optional<StringRef> value =
          attr->getValueAsOptionalString("defaultValue");
      if (!value || !attr->isSubClassOf("DefaultValuedAttr"))
        continue;
      p.value = value->str();
      // A flag's default (BoolAttr) is 0 or 1.
      if (p.value == "true" || p.value == "false")
        p.value = p.value == "true" ? "1" : "0";
      // An enum attribute's default is a C++ enumerator
      // (`::mlir::fsdp::RopeScaling::Default`): the table takes its value.
      const Record *base = attr->getValueAsDef("baseAttr");
      if (base->isSubClassOf("EnumAttr")) {
        const Record *info = base->getValueAsDef("enum");
        StringRef symbol = value->rsplit("::").second;
        p.value.clear();
        for (const Record *c : info->getValueAsListOfDefs("enumerants"))
          if (c->getValueAsString("symbol") == symbol)
            p.value = std::to_string(c->getValueAsInt("value"));
        if (p.value.empty())
          PrintFatalError(attr, "no case '" + symbol + "' in enum '" +
                                    info->getName() + "'");
      }
    }
}

/// The op's C++ methods that its kernels require: getFlops for a GEMM
/// (the interface's default counts 0), getKernelScratch for scratch
/// outputs; and neither where none of its kernels needs it.
void checkMethods(const Record *op,
                  const std::vector<const Kernel *> &kernels) {
  std::vector<StringRef> methods =
      op->getValueAsListOfStrings("fsdpKernelMethods");
  auto declares = [&](StringRef m) { return llvm::is_contained(methods, m); };
  bool gemm = llvm::any_of(kernels, [](const Kernel *k) { return k->gemm; });
  bool scratch = llvm::any_of(kernels, [](const Kernel *k) {
    return llvm::any_of(k->outs,
                        [](const Operand &o) { return o.role == "Scratch"; });
  });
  StringRef opName = op->getValueAsString("opName");
  if (declares("getFlops") != gemm)
    PrintFatalError(op, "op '" + opName + "' " +
                            (gemm ? "runs a GEMM: list getFlops in its "
                                    "kernelMethods"
                                  : "runs no GEMM: it keeps the default "
                                    "getFlops (0)"));
  if (declares("getKernelScratch") != scratch)
    PrintFatalError(op, "op '" + opName + "' " +
                            (scratch ? "has a kernel with scratch outputs: "
                                       "list getKernelScratch in its "
                                       "kernelMethods"
                                     : "has no kernel with scratch outputs"));
}

/// The ops that lower to a kernel: FSDP_KernelOpBase's `fsdpKernel` (one
/// kernel, named after the op) or `fsdpKernelVariants` (`<op>` and
/// `<op>_<variant>`).
void linkOps(const RecordKeeper &records, std::vector<Kernel> &kernels) {
  std::map<std::string, Kernel *> byEnumerator;
  for (Kernel &k : kernels)
    byEnumerator[k.enumerator] = &k;
  for (const Record *op :
       records.getAllDerivedDefinitionsIfDefined("FSDP_KernelOpBase")) {
    std::string opName = op->getValueAsString("opName").str();
    std::vector<StringRef> names =
        op->getValueAsListOfStrings("fsdpKernelVariants");
    StringRef single = op->getValueAsString("fsdpKernel");
    if (!single.empty())
      names.push_back(single);
    OpArgs args = readOpArgs(op);
    std::vector<const Kernel *> linked;
    for (StringRef name : names) {
      auto it = byEnumerator.find(name.str());
      if (it == byEnumerator.end())
        PrintFatalError(op, "no kernel '" + name + "' in FSDPKernels.td");
      Kernel &k = *it->second;
      bool named =
          k.name == opName ||
          (single.empty() && StringRef(k.name).starts_with(opName + "_"));
      if (!named)
        PrintFatalError(op, "op '" + opName + "' lowers to kernel '" + k.name +
                                "', which is not named after it");
      if (!single.empty())
        checkOperands(op, args, k);
      takeDefaults(args, k);
      linked.push_back(&k);
    }
    checkMethods(op, linked);
  }
}

/// The fsdp ops named after a kernel without being its FSDP_KernelOp:
/// allowed for the kernels lowered by hand (`byHand`), which must have one.
void checkOpNames(const RecordKeeper &records,
                  const std::vector<Kernel> &kernels) {
  std::map<std::string, const Record *> plainOps;
  for (const Record *op : records.getAllDerivedDefinitions("Op")) {
    const Record *dialect = op->getValueAsDef("opDialect");
    if (dialect->getValueAsString("name") == "fsdp" &&
        !op->isSubClassOf("FSDP_KernelOpBase"))
      plainOps[op->getValueAsString("opName").str()] = op;
  }
  for (const Kernel &k : kernels) {
    auto it = plainOps.find(k.name);
    if (it != plainOps.end() && !k.byHand)
      PrintFatalError(it->second,
                      "op 'fsdp." + k.name +
                          "' is named after a kernel: "
                          "derive it from FSDP_KernelOp, or mark the kernel "
                          "byHand and give it a case in LowerToRuntime.cpp");
    if (it == plainOps.end() && k.byHand)
      PrintFatalError(k.def, "kernel '" + k.name +
                                 "' is lowered by hand "
                                 "from op 'fsdp." +
                                 k.name + "', which is missing");
  }
}

std::vector<Kernel> readKernels(const RecordKeeper &records) {
  std::vector<Kernel> kernels;
  for (const Record *def : records.getAllDerivedDefinitions("FSDP_Kernel"))
    kernels.push_back(readKernel(def));
  llvm::sort(kernels, [](const Kernel &a, const Kernel &b) {
    return a.opcode < b.opcode;
  });
  std::map<std::string, const Kernel *> names;
  for (size_t i = 0; i < kernels.size(); ++i) {
    checkKernel(kernels[i], i);
    checkShapeRules(kernels[i]);
    if (!names.emplace(kernels[i].name, &kernels[i]).second)
      PrintFatalError(kernels[i].def, "two kernels named " + kernels[i].name);
  }
  linkOps(records, kernels);
  checkOpNames(records, kernels);
  return kernels;
}

//===----------------------------------------------------------------------===//
// The runtime's table
//===----------------------------------------------------------------------===//

/// PlanFormat.h's spelling of an operand (namespace plan::table).
std::string operandSpelling(const Operand &o) {
  static const std::map<std::string, std::string> helpers = {
      {"Float/Input", "floats"},
      {"Float/Input/opt", "optionalFloats"},
      {"TokenIds/Input", "tokenIds"},
      {"F32/Input", "stat"},
      {"Indices/Input", "indices"},
      {"Indices/Result", "indexResult"},
      {"F32/Input/opt", "optionalStat"},
      {"AnyFloat/Input", "anyFloats"},
      {"Float/Result", "result"},
      {"F32/Result", "statResult"},
      {"AnyFloat/Result", "anyResult"},
      {"Float/Scratch", "scratch"},
      {"F32/Scratch", "statScratch"},
      {"F32/Updated", "updated"},
      {"AnyFloat/Updated/opt", "optionalAnyUpdated"}};
  std::string key = o.rule + "/" + o.role + (o.optional ? "/opt" : "");
  auto it = helpers.find(key);
  if (it == helpers.end())
    PrintFatalError("no PlanFormat.h helper for an operand " + key);
  return it->second + "(\"" + o.name + "\")";
}

std::string paramSpelling(const Param &p) {
  if (!p.sameAs.empty())
    return "sameAs(\"" + p.name + "\", \"" + p.sameAs + "\")";
  std::string helper = p.type == "f32"   ? "f32Param"
                       : p.type == "f64" ? "f64Param"
                                         : "i64Param";
  if (p.value.empty())
    return helper + "(\"" + p.name + "\")";
  // An f32 default is the float the attribute holds, widened.
  std::string value =
      p.type == "f32" ? "double(float(" + p.value + "))" : p.value;
  return helper + "(\"" + p.name + "\", " + value + ")";
}

template <typename T, typename F>
std::string joined(const std::vector<T> &items, F spell) {
  std::vector<std::string> parts;
  for (const T &item : items)
    parts.push_back(spell(item));
  return llvm::join(parts, ", ");
}

void emitDispatchList(raw_ostream &os, const std::vector<Kernel> &kernels,
                      StringRef macro, bool gemm) {
  std::vector<std::string> names;
  for (const Kernel &k : kernels)
    if (!k.dispatch.empty() && !k.boundByHand && k.gemm == gemm &&
        !llvm::is_contained(names, k.dispatch)) // one method, two kernels
      names.push_back(k.dispatch);
  os << "#define " << macro << "(X)";
  for (const std::string &name : names)
    os << " \\\n  X(" << name << ")";
  os << "\n";
}

/// runCompute's case of kernel `k`: the call of its `dispatch`.
void emitCall(raw_ostream &os, const Kernel &k) {
  if (k.call.empty())
    return;
  if (k.dispatch.empty())
    PrintFatalError(k.def,
                    "kernel '" + k.name + "' has a call but no dispatch");
  std::set<std::string> dims = boundDims(k);
  SmallVector<StringRef> args;
  StringRef(k.call).split(args, ',');
  std::vector<std::string> spelled;
  for (StringRef arg : args)
    spelled.push_back(callArgument(k, arg.trim(), dims));
  os << "case plan::Opcode::" << k.enumerator << ":\n  k." << k.dispatch << "("
     << llvm::join(spelled, ", ") << ");\n  return true;\n";
}

/// One parameter of `k`'s kernel function, from argument `arg` of its
/// call: its type (E: the element type, `float` on the CPU) and name.
std::string declParam(const Kernel &k, StringRef arg, StringRef elem) {
  auto fail = [&](const Twine &what) {
    PrintFatalError(k.def, "kernel '" + k.name + "': call argument '" + arg +
                               "' " + what);
  };
  if (arg.starts_with("$")) {
    int index = operandIndex(k, arg.drop_front());
    bool output = index >= int(fsdp::plan::shapes::kMaxInputs);
    const Operand &o =
        output ? k.outs[index - fsdp::plan::shapes::kMaxInputs] : k.ins[index];
    std::string type = o.rule == "TokenIds" || o.rule == "Indices" ? "int32_t"
                       : o.rule == "F32"                           ? "float"
                       : o.rule == "Float"                         ? elem.str()
                                                                   : "";
    if (type.empty())
      fail("has no declared type (rule " + o.rule + ")");
    return (output ? "" : "const ") + type + " *" + o.name;
  }
  if (arg.consume_front("double(") && arg.consume_back(")"))
    return "double " + arg.str();
  if (arg == "null" || llvm::all_of(arg, llvm::isDigit))
    fail("is no name: the kernel's first call must name every parameter");
  for (const Param &p : k.params)
    if (p.name == arg)
      return std::string(p.type == "f32"   ? "float "
                         : p.type == "f64" ? "double "
                                           : "int64_t ") +
             arg.str();
  return "int64_t " + arg.str(); // a dim (callArgument checked it)
}

/// The declaration of kernel `k`'s function in namespace fsdp::rt::cpu
/// (`cuda` false: f32, a GEMM's first parameter the Blas) or
/// fsdp::rt::cuda (a template over the element type Elem when an operand
/// is Float, the Context first; not E, which a dim may be named), as its
/// call passes the arguments.
void emitDecl(raw_ostream &os, const Kernel &k, bool cuda) {
  SmallVector<StringRef> args;
  StringRef(k.call).split(args, ',');
  std::vector<std::string> params;
  if (cuda)
    params.push_back("const Context &ctx");
  else if (k.gemm)
    params.push_back("const Blas &blas");
  bool templated = false;
  std::set<std::string> dims = boundDims(k);
  for (StringRef arg : args) {
    callArgument(k, arg.trim(), dims); // the same checks as the call's
    params.push_back(declParam(k, arg.trim(), cuda ? "Elem" : "float"));
    templated |= cuda && StringRef(params.back()).contains("Elem *");
  }
  if (templated)
    os << "template <typename Elem>\n";
  os << "void " << k.dispatch << "(" << llvm::join(params, ", ") << ");\n";
}

/// The declarations of the kernels runCompute calls (the first kernel of
/// each `dispatch`; those bound by hand keep their hand-written ones).
void emitDecls(raw_ostream &os, const std::vector<Kernel> &kernels, bool cuda) {
  std::set<std::string> seen;
  for (const Kernel &k : kernels)
    if (!k.call.empty() && !k.boundByHand && seen.insert(k.dispatch).second)
      emitDecl(os, k, cuda);
}

/// KernelRules.h's entry of kernel `k`: its rules, dim checks,
/// derivation and extra check.
void emitShapes(raw_ostream &os, const Kernel &k) {
  std::vector<std::string> rules, checks;
  for (const ShapeRule &rule : k.shapes)
    rules.push_back("{" + std::to_string(operandIndex(k, rule.operand)) +
                    ", \"" + rule.pattern + "\"}");
  for (const std::string &check : k.dimChecks)
    checks.push_back("\"" + check + "\"");
  os << "rules(O::" << k.enumerator << ",\n"
     << "      {{" << llvm::join(rules, ", ") << "}},\n"
     << "      {" << llvm::join(checks, ", ") << "},\n"
     << "      Derive::" << (k.derive.empty() ? "None" : k.derive) << ", \""
     << k.extraCheck << "\"),\n";
}

void emitTable(raw_ostream &os, const std::vector<Kernel> &kernels) {
  os << "// The kernel table, generated by fsdp-tblgen -gen-kernel-table from\n"
        "// include/fsdp/Dialect/FSDP/IR/FSDPKernels.td: do not edit (ninja\n"
        "// fsdp-kernel-table refreshes it; the kernel-table-in-sync test\n"
        "// fails when it is stale).\n\n";
  os << "#ifdef FSDP_KERNEL_OPCODES\n";
  for (const Kernel &k : kernels)
    os << k.enumerator << " = " << k.opcode << ",\n";
  os << "#undef FSDP_KERNEL_OPCODES\n#endif\n\n";
  os << "#ifdef FSDP_KERNEL_LAST_OPCODE\n"
     << "#undef FSDP_KERNEL_LAST_OPCODE\n"
     << "#define FSDP_KERNEL_LAST_OPCODE " << kernels.back().enumerator
     << "\n#endif\n\n";
  os << "#ifdef FSDP_KERNEL_TABLE\n";
  for (const Kernel &k : kernels) {
    os << "kernel(O::" << k.enumerator << ", \"" << k.name << "\",\n"
       << "       {" << joined(k.ins, operandSpelling) << "},\n"
       << "       {" << joined(k.outs, operandSpelling) << "},\n"
       << "       {" << joined(k.params, paramSpelling) << "}),\n";
  }
  os << "#undef FSDP_KERNEL_TABLE\n#endif\n\n";
  os << "#ifdef FSDP_KERNEL_SHAPES\n";
  for (const Kernel &k : kernels)
    emitShapes(os, k);
  os << "#undef FSDP_KERNEL_SHAPES\n#endif\n\n";
  os << "#ifdef FSDP_KERNEL_CALLS\n";
  for (const Kernel &k : kernels)
    emitCall(os, k);
  os << "#undef FSDP_KERNEL_CALLS\n#endif\n\n";
  os << "#ifdef FSDP_KERNEL_DISPATCH\n";
  emitDispatchList(os, kernels, "FSDP_RUNTIME_GEMM_KERNELS", true);
  emitDispatchList(os, kernels, "FSDP_RUNTIME_OTHER_KERNELS", false);
  os << "#undef FSDP_KERNEL_DISPATCH\n#endif\n";
}

/// KernelDecls.inc: each backend's declarations of the kernels that
/// runCompute calls, in a file of their own (a change to a kernel's
/// signature recompiles the backends, not everything that reads the
/// table).
void emitDeclsFile(raw_ostream &os, const std::vector<Kernel> &kernels) {
  os << "// The backends' kernel declarations, generated by fsdp-tblgen\n"
        "// -gen-kernel-decls from include/fsdp/Dialect/FSDP/IR/"
        "FSDPKernels.td\n"
        "// (each kernel's `call`): do not edit (ninja fsdp-kernel-table\n"
        "// refreshes it; the kernel-decls-in-sync test fails when it is "
        "stale).\n\n";
  os << "#ifdef FSDP_KERNEL_CPU_DECLS\n";
  emitDecls(os, kernels, /*cuda=*/false);
  os << "#undef FSDP_KERNEL_CPU_DECLS\n#endif\n\n";
  os << "#ifdef FSDP_KERNEL_CUDA_DECLS\n";
  emitDecls(os, kernels, /*cuda=*/true);
  os << "#undef FSDP_KERNEL_CUDA_DECLS\n#endif\n";
}

void emitOpcodesPy(raw_ostream &os, const std::vector<Kernel> &kernels) {
  os << "# The plan kernels by opcode, generated by fsdp-tblgen\n"
        "# -gen-kernel-opcodes-py from include/fsdp/Dialect/FSDP/IR/"
        "FSDPKernels.td:\n"
        "# do not edit (ninja fsdp-kernel-table refreshes it).\n"
        "OPCODES = [\n";
  for (const Kernel &k : kernels)
    os << "    \"" << k.name << "\",\n";
  os << "]\n";
}

//===----------------------------------------------------------------------===//
// plan-format.md's table
//===----------------------------------------------------------------------===//

std::string docOperand(const Operand &o) {
  std::vector<std::string> marks;
  if (o.rule == "TokenIds")
    marks.push_back("ids");
  if (o.rule == "Indices")
    marks.push_back("i32 indices");
  if (o.rule == "F32" && o.role != "Updated")
    marks.push_back("f32");
  if (o.rule == "AnyFloat")
    marks.push_back("any float");
  if (o.optional)
    marks.push_back("optional");
  if (o.role == "Scratch")
    marks.push_back("scratch");
  if (o.role == "Updated")
    marks.push_back("updated, f32");
  if (marks.empty())
    return o.name;
  return o.name + " (" + llvm::join(marks, ", ") + ")";
}

std::string docParam(const Param &p) {
  if (!p.sameAs.empty())
    return p.name + " (default: " + p.sameAs + ")";
  if (!p.value.empty())
    return p.name + " (default " + p.value + ")";
  return p.name;
}

/// The shape rules as the table's column shows them: `input [*R, C]`,
/// ..., then the dim checks and the derivation.
std::string docShapes(const Kernel &k) {
  std::vector<std::string> parts;
  for (const ShapeRule &rule : k.shapes)
    parts.push_back(rule.operand + " `" + rule.pattern + "`");
  for (const std::string &check : k.dimChecks)
    parts.push_back("`" + check + "`");
  if (!k.derive.empty())
    parts.push_back(k.derive);
  return llvm::join(parts, ", ");
}

void emitDoc(raw_ostream &os, const std::vector<Kernel> &kernels) {
  os << "| opcode | kernel | inputs | outputs | params | shapes | notes |\n"
        "|---|---|---|---|---|---|---|\n";
  for (const Kernel &k : kernels)
    os << "| " << k.opcode << " | " << k.name << " | "
       << joined(k.ins, docOperand) << " | " << joined(k.outs, docOperand)
       << " | " << joined(k.params, docParam) << " | " << docShapes(k) << " | "
       << k.notes << " |\n";
}

bool generate(raw_ostream &os, const RecordKeeper &records) {
  std::vector<Kernel> kernels = readKernels(records);
  if (kernels.empty())
    PrintFatalError("no FSDP_Kernel records");
  switch (action) {
  case GenTable:
    emitTable(os, kernels);
    break;
  case GenDecls:
    emitDeclsFile(os, kernels);
    break;
  case GenOpcodesPy:
    emitOpcodesPy(os, kernels);
    break;
  case GenDoc:
    emitDoc(os, kernels);
    break;
  }
  return false;
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv);
  return TableGenMain(argv[0], &generate);
}
