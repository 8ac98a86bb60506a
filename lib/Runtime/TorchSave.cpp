#include "TorchSave.h"

#include <cstring>
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

// ---- Reading: a small pickle machine for the opcodes torch.save writes for
// a dict of tensors (protocol 2; a few of 4's), no Python objects.

namespace {

at::ScalarType dtypeOfStorage(const std::string &name) {
  for (at::ScalarType t : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong, at::kInt,
                           at::kShort, at::kChar, at::kByte, at::kBool})
    if (name == storageClass(t))
      return t;
  return at::ScalarType::Undefined;
}

struct PValue {
  enum Kind { None, Int, Float, Str, Tuple, Dict, Global, Tensor, Mark } kind = None;
  int64_t i = 0;
  double f = 0;
  std::string s, s2;         ///< Str; Global module and name
  std::vector<PValue> items; ///< Tuple; Dict as key, value, key, value...
  at::Tensor tensor;         ///< Tensor (also a storage: 1-D)

  static PValue of(Kind k) {
    PValue v;
    v.kind = k;
    return v;
  }
};

class Unpickler {
public:
  Unpickler(caffe2::serialize::PyTorchStreamReader &zip, std::string data, std::string path)
      : zip_(zip), data_(std::move(data)), path_(std::move(path)) {}

  Expected<PValue> run() {
    while (pos_ < data_.size()) {
      unsigned char op = uint8_t(data_[pos_++]);
      if (op == '.') {
        if (stack_.empty())
          return fail("empty stack at STOP");
        return pop();
      }
      Status st = step(op);
      if (!st.isOk())
        return st;
    }
    return fail("no STOP opcode");
  }

private:
  Status fail(const std::string &what) const {
    return errorf("{}: error: cannot read this torch.save archive: {} (pickle offset {})", path_,
                  what, pos_);
  }
  bool need(size_t n) const { return pos_ + n <= data_.size(); }
  uint64_t little(size_t n) {
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k)
      v |= uint64_t(uint8_t(data_[pos_ + k])) << (8 * k);
    pos_ += n;
    return v;
  }
  std::string line() {
    size_t end = data_.find('\n', pos_);
    std::string s = data_.substr(pos_, end - pos_);
    pos_ = end == std::string::npos ? data_.size() : end + 1;
    return s;
  }
  PValue pop() {
    PValue v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  std::vector<PValue> popToMark() {
    size_t m = stack_.size();
    while (m > 0 && stack_[m - 1].kind != PValue::Mark)
      --m;
    std::vector<PValue> out(std::make_move_iterator(stack_.begin() + m),
                            std::make_move_iterator(stack_.end()));
    stack_.resize(m > 0 ? m - 1 : 0);
    return out;
  }
  void push(PValue v) { stack_.push_back(std::move(v)); }
  void pushInt(int64_t v) {
    PValue p;
    p.kind = PValue::Int;
    p.i = v;
    push(std::move(p));
  }
  void pushTuple(std::vector<PValue> items) {
    PValue p;
    p.kind = PValue::Tuple;
    p.items = std::move(items);
    push(std::move(p));
  }

  Status step(unsigned char op);
  Status reduce();
  Status persistentLoad();
  Status setItems(std::vector<PValue> kv);

  caffe2::serialize::PyTorchStreamReader &zip_;
  std::string data_, path_;
  size_t pos_ = 0;
  std::vector<PValue> stack_;
  std::map<uint64_t, PValue> memo_;
  std::map<std::string, at::Tensor> storages_;
};

Status Unpickler::step(unsigned char op) {
  static const std::string kFixed = "\x80KJMhqjr\x8a";
  size_t fixed[] = {1, 1, 4, 2, 1, 1, 4, 4, 1};
  size_t k = kFixed.find(char(op));
  if (k != std::string::npos && !need(fixed[k]))
    return fail("truncated");
  switch (op) {
  case 0x80: // PROTO
    pos_ += 1;
    return Status::ok();
  case 'K':
    pushInt(int64_t(little(1)));
    return Status::ok();
  case 'M':
    pushInt(int64_t(little(2)));
    return Status::ok();
  case 'J':
    pushInt(int64_t(int32_t(uint32_t(little(4)))));
    return Status::ok();
  case 0x8a: { // LONG1
    size_t n = little(1);
    if (n > 8 || !need(n))
      return fail("integer too long");
    uint64_t v = little(n);
    if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1)
      v |= ~uint64_t(0) << (8 * n);
    pushInt(int64_t(v));
    return Status::ok();
  }
  case 'G': { // BINFLOAT, big-endian
    if (!need(8))
      return fail("truncated");
    uint64_t bits = 0;
    for (int b = 0; b < 8; ++b)
      bits = (bits << 8) | uint8_t(data_[pos_++]);
    PValue p;
    p.kind = PValue::Float;
    std::memcpy(&p.f, &bits, 8);
    push(std::move(p));
    return Status::ok();
  }
  case 'X':
  case 0x8c: { // BINUNICODE, SHORT_BINUNICODE
    size_t width = op == 'X' ? 4 : 1;
    if (!need(width))
      return fail("truncated");
    size_t n = little(width);
    if (!need(n))
      return fail("truncated string");
    PValue p;
    p.kind = PValue::Str;
    p.s = data_.substr(pos_, n);
    pos_ += n;
    push(std::move(p));
    return Status::ok();
  }
  case 'c': {
    PValue p;
    p.kind = PValue::Global;
    p.s = line();
    p.s2 = line();
    push(std::move(p));
    return Status::ok();
  }
  case '(':
    push(PValue::of(PValue::Mark));
    return Status::ok();
  case ')':
    pushTuple({});
    return Status::ok();
  case 't':
    pushTuple(popToMark());
    return Status::ok();
  case 0x85:
  case 0x86:
  case 0x87: {
    size_t n = op - 0x84;
    if (stack_.size() < n)
      return fail("stack underflow");
    std::vector<PValue> items(std::make_move_iterator(stack_.end() - long(n)),
                              std::make_move_iterator(stack_.end()));
    stack_.resize(stack_.size() - n);
    pushTuple(std::move(items));
    return Status::ok();
  }
  case 'N':
    push(PValue{});
    return Status::ok();
  case 0x88:
  case 0x89:
    pushInt(op == 0x88);
    return Status::ok();
  case '}':
    push(PValue::of(PValue::Dict));
    return Status::ok();
  case 'u':
    return setItems(popToMark());
  case 's': {
    if (stack_.size() < 3)
      return fail("stack underflow");
    std::vector<PValue> kv;
    PValue v = pop(), key = pop();
    kv.push_back(std::move(key));
    kv.push_back(std::move(v));
    return setItems(std::move(kv));
  }
  case ']':
    pushTuple({});
    return Status::ok();
  case 'a':
  case 'e': {
    std::vector<PValue> items = op == 'e' ? popToMark() : std::vector<PValue>{};
    if (op == 'a' && !stack_.empty())
      items.push_back(pop());
    if (stack_.empty())
      return fail("stack underflow");
    for (auto &v : items)
      stack_.back().items.push_back(std::move(v));
    return Status::ok();
  }
  case 'b': // BUILD: the object keeps its value; its state is dropped
    if (stack_.size() < 2)
      return fail("stack underflow");
    pop();
    return Status::ok();
  case 'q':
  case 'r':
    if (stack_.empty())
      return fail("stack underflow");
    memo_[little(op == 'q' ? 1 : 4)] = stack_.back();
    return Status::ok();
  case 'h':
  case 'j': {
    auto it = memo_.find(little(op == 'h' ? 1 : 4));
    if (it == memo_.end())
      return fail("unknown memo entry");
    push(it->second);
    return Status::ok();
  }
  case 'Q':
    return persistentLoad();
  case 'R':
    return reduce();
  default:
    return fail(fmt::format("unsupported pickle opcode 0x{:02x}", op));
  }
}

Status Unpickler::setItems(std::vector<PValue> kv) {
  if (stack_.empty() || stack_.back().kind != PValue::Dict || kv.size() % 2)
    return fail("SETITEMS without a dict");
  for (auto &v : kv)
    stack_.back().items.push_back(std::move(v));
  return Status::ok();
}

// ('storage', torch.<Dtype>Storage, key, location, numel)
Status Unpickler::persistentLoad() {
  if (stack_.empty())
    return fail("stack underflow");
  PValue pid = pop();
  if (pid.kind != PValue::Tuple || pid.items.size() < 5 || pid.items[1].kind != PValue::Global ||
      pid.items[2].kind != PValue::Str)
    return fail("a persistent id that is not a storage");
  at::ScalarType dtype = dtypeOfStorage(pid.items[1].s2);
  if (dtype == at::ScalarType::Undefined)
    return fail(fmt::format("unsupported storage type '{}'", pid.items[1].s2));
  const std::string &key = pid.items[2].s;
  auto it = storages_.find(key);
  if (it == storages_.end()) {
    std::string record = "data/" + key;
    if (!zip_.hasRecord(record))
      return fail(fmt::format("no record '{}'", record));
    auto [ptr, size] = zip_.getRecord(record);
    int64_t numel = int64_t(size / c10::elementSize(dtype));
    at::Tensor t = at::empty({numel}, at::TensorOptions().dtype(dtype));
    std::memcpy(t.data_ptr(), ptr.get(), numel * c10::elementSize(dtype));
    it = storages_.emplace(key, t).first;
  }
  PValue v;
  v.kind = PValue::Tensor;
  v.tensor = it->second;
  push(std::move(v));
  return Status::ok();
}

std::vector<int64_t> intsOf(const PValue &tuple) {
  std::vector<int64_t> out;
  for (const PValue &v : tuple.items)
    out.push_back(v.i);
  return out;
}

Status Unpickler::reduce() {
  if (stack_.size() < 2)
    return fail("stack underflow");
  PValue args = pop(), fn = pop();
  if (fn.kind != PValue::Global || args.kind != PValue::Tuple)
    return fail("REDUCE of something that is not a global");
  if (fn.s == "collections" && fn.s2 == "OrderedDict") {
    push(PValue::of(PValue::Dict));
    return Status::ok();
  }
  if (fn.s == "torch._utils" && fn.s2 == "_rebuild_tensor_v2" && args.items.size() >= 4 &&
      args.items[0].kind == PValue::Tensor) {
    std::vector<int64_t> size = intsOf(args.items[2]), stride = intsOf(args.items[3]);
    int64_t offset = args.items[1].i, last = offset;
    for (size_t d = 0; d < size.size(); ++d)
      last += size[d] > 0 ? (size[d] - 1) * stride[d] : 0;
    if (offset < 0 || last >= std::max<int64_t>(1, args.items[0].tensor.numel()))
      return fail("a tensor beyond its storage");
    PValue v;
    v.kind = PValue::Tensor;
    v.tensor = args.items[0].tensor.as_strided(size, stride, offset);
    push(std::move(v));
    return Status::ok();
  }
  return fail(fmt::format("unsupported global {}.{}", fn.s, fn.s2));
}

} // namespace

Expected<std::map<std::string, at::Tensor>> torchLoadTensors(const std::string &path) {
  try {
    caffe2::serialize::PyTorchStreamReader zip(path);
    auto [ptr, size] = zip.getRecord("data.pkl");
    Unpickler u(zip, std::string(static_cast<const char *>(ptr.get()), size), path);
    auto top = u.run();
    if (!top)
      return top.status();
    if (top->kind != PValue::Dict)
      return errorf("{}: error: holds no dict of tensors (a state_dict)", path);
    std::map<std::string, at::Tensor> out;
    for (size_t k = 0; k + 1 < top->items.size(); k += 2)
      if (top->items[k].kind == PValue::Str && top->items[k + 1].kind == PValue::Tensor)
        out[top->items[k].s] = top->items[k + 1].tensor;
    return out;
  } catch (const c10::Error &e) {
    return errorf("{}: error: not a torch.save archive: {}", path, e.what_without_backtrace());
  }
}

} // namespace nnsc::rt
