#include "TorchSave.h"

#include <vector>

#include <caffe2/serialize/inline_container.h>

namespace nnsc::rt {

namespace {

// Storage classes by dtype: the names torch.save writes and torch.load's
// weights_only unpickler accepts (1.13 and 2.x alike).
const char *storageClass(at::ScalarType t) {
  switch (t) {
  case at::kFloat:
    return "FloatStorage";
  case at::kDouble:
    return "DoubleStorage";
  case at::kHalf:
    return "HalfStorage";
  case at::kBFloat16:
    return "BFloat16Storage";
  case at::kLong:
    return "LongStorage";
  case at::kInt:
    return "IntStorage";
  case at::kShort:
    return "ShortStorage";
  case at::kChar:
    return "CharStorage";
  case at::kByte:
    return "ByteStorage";
  case at::kBool:
    return "BoolStorage";
  default:
    return nullptr;
  }
}

// A protocol-2 pickle of plain opcodes, the subset every weights_only
// unpickler implements.
class PickleWriter {
public:
  PickleWriter() { out_ += "\x80\x02"; }
  void mark() { out_ += '('; }
  void tuple() { out_ += 't'; }
  void emptyTuple() { out_ += ')'; }
  void reduce() { out_ += 'R'; }
  void setItems() { out_ += 'u'; }
  void persistentId() { out_ += 'Q'; }
  void boolean(bool v) { out_ += v ? '\x88' : '\x89'; }
  void stop() { out_ += '.'; }
  void global(const std::string &module, const std::string &name) {
    out_ += 'c' + module + '\n' + name + '\n';
  }
  void string(const std::string &s) {
    out_ += 'X';
    appendLittle(uint32_t(s.size()), 4);
    out_ += s;
  }
  // BININT for what fits 32 bits, LONG1 (8 bytes, two's complement) beyond.
  void integer(int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      out_ += 'J';
      appendLittle(uint32_t(int32_t(v)), 4);
    } else {
      out_ += "\x8a\x08";
      appendLittle(uint64_t(v), 8);
    }
  }
  void intTuple(at::IntArrayRef values) {
    mark();
    for (int64_t v : values)
      integer(v);
    tuple();
  }
  std::string take() { return std::move(out_); }

private:
  void appendLittle(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i)
      out_ += char((v >> (8 * i)) & 0xff);
  }
  std::string out_;
};

void emptyOrderedDict(PickleWriter &p) {
  p.global("collections", "OrderedDict");
  p.emptyTuple();
  p.reduce();
}

// torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)
void pickleTensor(PickleWriter &p, const at::Tensor &t, const std::string &key) {
  p.global("torch._utils", "_rebuild_tensor_v2");
  p.mark();
  p.mark();
  p.string("storage");
  p.global("torch", storageClass(t.scalar_type()));
  p.string(key);
  p.string("cpu");
  p.integer(t.numel());
  p.tuple();
  p.persistentId();
  p.integer(0);
  p.intTuple(t.sizes());
  p.intTuple(t.strides());
  p.boolean(false);
  emptyOrderedDict(p);
  p.tuple();
  p.reduce();
}

} // namespace

Expected<std::string> torchSaveBytes(const std::map<std::string, at::Tensor> &tensors) {
  // One storage per distinct tensor, numbered in first-use order: tied names
  // point at the same record.
  std::map<const c10::TensorImpl *, size_t> storageOf;
  std::vector<at::Tensor> storages;
  PickleWriter p;
  emptyOrderedDict(p);
  p.mark();
  for (const auto &[name, tensor] : tensors) {
    if (!storageClass(tensor.scalar_type()))
      return errorf("error: cannot save '{}': dtype {} has no torch.save storage class", name,
                    c10::toString(tensor.scalar_type()));
    auto [it, fresh] = storageOf.try_emplace(tensor.unsafeGetTensorImpl(), storages.size());
    if (fresh)
      storages.push_back(tensor.detach().cpu().contiguous());
    p.string(name);
    pickleTensor(p, storages[it->second], std::to_string(it->second));
  }
  p.setItems();
  p.stop();
  const std::string pickle = p.take();

  std::string bytes;
  try {
    caffe2::serialize::PyTorchStreamWriter writer([&bytes](const void *data, size_t n) {
      bytes.append(static_cast<const char *>(data), n);
      return n;
    });
    writer.writeRecord("data.pkl", pickle.data(), pickle.size());
    writer.writeRecord("byteorder", "little", 6);
    for (size_t k = 0; k < storages.size(); ++k) {
      const at::Tensor &t = storages[k];
      writer.writeRecord("data/" + std::to_string(k), t.data_ptr(), t.numel() * t.element_size());
    }
    writer.writeEndOfFile();
  } catch (const c10::Error &e) {
    return errorf("error: cannot write the archive: {}", e.what_without_backtrace());
  }
  return bytes;
}

} // namespace nnsc::rt
