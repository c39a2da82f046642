//===- PlanWriter.cpp - the step program as a plan file -------------------===//
//
// A direct serialisation of the fsdprt program: buffers in declaration
// order (their index is their id), parameters, then kernels in program
// order. Everything little-endian; the payload is covered by a CRC-32 in the
// header. The layout is documented in docs/plan-format.md and defined by
// runtime/include/fsdp/runtime/PlanFormat.h.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Target/Plan.h"

#include "fsdp/Dialect/FSDP/IR/FSDP.h"
#include "fsdp/Dialect/Runtime/IR/Runtime.h"
#include "fsdp/runtime/PlanFormat.h"

#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Endian.h"

using namespace mlir;
using namespace mlir::fsdp;
namespace plan = ::fsdp::plan;

namespace {
class PayloadWriter {
public:
  template <typename T> void put(T value) {
    char bytes[sizeof(T)];
    llvm::support::endian::write<T, llvm::endianness::little>(bytes, value);
    data.append(bytes, sizeof(T));
  }
  void putF64(double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    put<uint64_t>(bits);
  }
  void putShape(ArrayRef<int64_t> shape) {
    put<uint32_t>(shape.size());
    for (int64_t d : shape)
      put<int64_t>(d);
  }
  uint32_t string(StringRef s) {
    auto [it, inserted] = stringIds.try_emplace(s, strings.size());
    if (inserted)
      strings.push_back(s.str());
    return it->second;
  }

  std::string data;
  std::vector<std::string> strings;
  llvm::StringMap<uint32_t> stringIds;
};

std::optional<plan::DType> dtypeOf(Type type) {
  if (type.isF32())
    return plan::DType::F32;
  if (type.isBF16())
    return plan::DType::BF16;
  if (type.isInteger(32))
    return plan::DType::I32;
  return std::nullopt;
}
} // namespace

LogicalResult mlir::fsdp::writePlan(ModuleOp module, llvm::raw_ostream &os) {
  func::FuncOp program;
  for (func::FuncOp func : module.getOps<func::FuncOp>())
    if (func->hasAttr(fsdprt::FSDPRuntimeDialect::kProgramAttrName))
      program = func;
  if (!program)
    return module.emitError()
           << "no step program to write: run --fsdp-lower-to-runtime and "
              "--fsdp-plan-memory (or --fsdp-train-pipeline) first";
  auto arena = program->getAttrOfType<IntegerAttr>(
      fsdprt::FSDPRuntimeDialect::kArenaSizeAttrName);
  auto peak = program->getAttrOfType<DictionaryAttr>(
      fsdprt::FSDPRuntimeDialect::kPeakAttrName);
  if (!arena || !peak)
    return program.emitError()
           << "memory is not planned: run --fsdp-plan-memory first";

  Block &body = program.getBody().front();
  PayloadWriter w;
  llvm::DenseMap<Value, uint32_t> bufferIds;
  SmallVector<fsdprt::BufferOp> buffers;
  SmallVector<fsdprt::KernelOp> kernels;
  for (Operation &op : body) {
    if (auto buffer = llvm::dyn_cast<fsdprt::BufferOp>(op)) {
      if (!buffer.getOffset())
        return buffer.emitOpError() << "has no offset: run --fsdp-plan-memory";
      if (!dtypeOf(buffer.getType().getElementType()))
        return buffer.emitOpError() << "has an element type plans cannot hold";
      bufferIds[buffer.getBuffer()] = buffers.size();
      buffers.push_back(buffer);
    } else if (auto kernel = llvm::dyn_cast<fsdprt::KernelOp>(op)) {
      kernels.push_back(kernel);
    }
  }

  SmallVector<ParamOp> params(module.getOps<ParamOp>());
  llvm::StringMap<uint32_t> paramIndex;
  for (auto [i, param] : llvm::enumerate(params))
    paramIndex[param.getSymName()] = i;

  // Header fields of the payload.
  w.put<uint32_t>(1); // world size: one rank until sharding arrives
  w.put<uint64_t>(arena.getInt());
  w.put<uint64_t>(llvm::cast<IntegerAttr>(peak.get("bytes")).getInt());
  w.put<uint64_t>(llvm::cast<IntegerAttr>(peak.get("kernel")).getInt());
  for (StringRef row :
       {"params", "grads", "optimizer", "activations", "scratch", "inputs"})
    w.put<uint64_t>(llvm::cast<IntegerAttr>(peak.get(row)).getInt());

  // Buffers.
  w.put<uint32_t>(buffers.size());
  for (fsdprt::BufferOp buffer : buffers) {
    w.put<uint32_t>(uint32_t(buffer.getKind()));
    w.put<uint32_t>(uint32_t(*dtypeOf(buffer.getType().getElementType())));
    w.put<uint64_t>(*buffer.getOffset());
    w.put<uint64_t>(buffer.getSizeInBytes());
    w.putShape(buffer.getType().getShape());
    int32_t owner = -1;
    if (buffer.getParam()) {
      auto it = paramIndex.find(*buffer.getParam());
      if (it == paramIndex.end())
        return buffer.emitOpError() << "names an unknown parameter";
      owner = it->second;
    }
    w.put<int32_t>(owner);
    w.put<int32_t>(buffer.getInput() ? int32_t(*buffer.getInput()) : -1);
  }

  // Parameters: what the runtime needs to create, initialise and report.
  llvm::DenseMap<Attribute, uint32_t> paramBuffer;
  for (fsdprt::BufferOp buffer : buffers)
    if (buffer.getKind() == fsdprt::BufferKind::Param)
      paramBuffer[buffer.getParamAttr()] = bufferIds[buffer.getBuffer()];
  w.put<uint32_t>(params.size());
  for (ParamOp param : params) {
    auto ref = FlatSymbolRefAttr::get(param.getSymNameAttr());
    auto it = paramBuffer.find(ref);
    if (it == paramBuffer.end())
      return param.emitOpError() << "has no buffer in the step program";
    std::optional<plan::DType> dtype =
        dtypeOf(param.getTensorType().getElementType());
    if (!dtype)
      return param.emitOpError() << "has an element type plans cannot hold";
    w.put<uint32_t>(w.string(param.getSymName()));
    w.put<uint32_t>(uint32_t(*dtype));
    w.putShape(param.getTensorType().getShape());
    w.put<uint32_t>(uint32_t(param.getInit().getKind()));
    w.putF64(param.getInit().getStd().convertToDouble());
    w.put<uint32_t>(param.getNoWeightDecay() ? 1 : 0);
    w.put<uint32_t>(it->second);
    // The element range of the full parameter held by this rank.
    w.put<int64_t>(0);
    w.put<int64_t>(param.getNumElements());
  }

  // The program.
  Value loss = body.getTerminator()->getOperand(0);
  w.put<uint32_t>(bufferIds.lookup(loss));
  w.put<uint32_t>(kernels.size());
  for (fsdprt::KernelOp kernel : kernels) {
    const plan::KernelInfo *info = plan::findKernel(kernel.getName().str());
    w.put<uint32_t>(uint32_t(info->opcode));
    w.put<uint32_t>(kernel.getUnit() ? w.string(*kernel.getUnit())
                                     : plan::kNone);
    for (ValueRange group : {ValueRange(kernel.getIns()),
                             ValueRange(kernel.getOuts())}) {
      w.put<uint32_t>(group.size());
      for (Value v : group)
        w.put<uint32_t>(bufferIds.lookup(v));
    }
    size_t count = plan::numParams(*info);
    w.put<uint32_t>(count);
    for (size_t i = 0; i < count; ++i) {
      Attribute value = kernel.getParams()->get(
          StringRef(info->params[i].data(), info->params[i].size()));
      if (auto f = llvm::dyn_cast<FloatAttr>(value))
        w.putF64(f.getValueAsDouble());
      else
        w.putF64(double(llvm::cast<IntegerAttr>(value).getInt()));
    }
  }

  // Strings last: everything above may have added some.
  PayloadWriter tail;
  tail.put<uint32_t>(w.strings.size());
  for (const std::string &s : w.strings) {
    tail.put<uint32_t>(s.size());
    tail.data += s;
  }
  std::string payload = w.data + tail.data;

  PayloadWriter header;
  header.data.append(plan::kMagic, sizeof(plan::kMagic));
  header.put<uint32_t>(plan::kPlanVersion);
  header.put<uint32_t>(0); // flags
  header.put<uint64_t>(payload.size());
  header.put<uint32_t>(plan::crc32(payload.data(), payload.size()));
  header.put<uint32_t>(0);
  header.put<uint64_t>(0);
  header.put<uint64_t>(0);
  assert(header.data.size() == plan::kHeaderSize);
  os << header.data << payload;
  return success();
}

void mlir::fsdp::registerToPlanTranslation() {
  TranslateFromMLIRRegistration registration(
      "fsdp-to-plan", "Write the step program as an fsdp-run plan file",
      [](Operation *op, llvm::raw_ostream &os) {
        auto module = llvm::dyn_cast<ModuleOp>(op);
        if (!module)
          return LogicalResult(op->emitError() << "expected a module");
        return writePlan(module, os);
      },
      [](DialectRegistry &registry) {
        registry.insert<FSDPDialect, fsdprt::FSDPRuntimeDialect,
                        func::FuncDialect, arith::ArithDialect>();
      });
}
