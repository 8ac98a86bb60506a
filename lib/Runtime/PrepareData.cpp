#include "nnsc/Runtime/PrepareData.h"

#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "nnsc/Support/File.h"

namespace nnsc::rt {

namespace {

// Decodes UTF-8; returns the byte offset of the first bad sequence or npos.
size_t decodeUtf8(const std::string &s, std::vector<uint32_t> &out) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size())
      return i;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (int k = 1; k < len; ++k) {
      unsigned char cc = s[i + k];
      if ((cc >> 6) != 2)
        return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    out.push_back(cp);
    i += len;
  }
  return std::string::npos;
}

std::string encodeUtf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xc0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += char(0xe0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3f));
    s += char(0x80 | (cp & 0x3f));
  } else {
    s += char(0xf0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3f));
    s += char(0x80 | ((cp >> 6) & 0x3f));
    s += char(0x80 | (cp & 0x3f));
  }
  return s;
}

Status writeTokens(const std::string &path, const std::vector<uint32_t> &chars, size_t begin,
                   size_t end, const std::map<uint32_t, uint16_t> &stoi) {
  std::string bytes;
  bytes.reserve((end - begin) * 2);
  for (size_t i = begin; i < end; ++i) {
    uint16_t id = stoi.at(chars[i]);
    bytes += char(id & 0xff);
    bytes += char(id >> 8);
  }
  return writeFileAtomic(path, bytes);
}

} // namespace

Expected<PreparedData> prepareCharData(const std::string &inputPath, const std::string &outDir) {
  auto text = readFile(inputPath);
  if (!text)
    return text.status();
  std::vector<uint32_t> chars;
  size_t bad = decodeUtf8(*text, chars);
  if (bad != std::string::npos)
    return errorf("{}: error: invalid UTF-8 at byte offset {}", inputPath, bad);
  if (chars.size() < 2)
    return errorf("{}: error: input is empty; need some text to tokenize", inputPath);
  std::map<uint32_t, uint16_t> stoi;
  for (uint32_t c : chars)
    stoi[c] = 0;
  if (stoi.size() > 65536)
    return errorf("{}: error: {} distinct characters do not fit uint16 token ids", inputPath,
                  stoi.size());
  nlohmann::json itos = nlohmann::json::array(), stoiJson = nlohmann::json::object();
  uint16_t next = 0;
  for (auto &[c, id] : stoi) {
    id = next++;
    itos.push_back(encodeUtf8(c));
    stoiJson[encodeUtf8(c)] = id;
  }
  NNSC_RETURN_IF_ERROR(makeDirs(outDir));
  size_t split = static_cast<size_t>(double(chars.size()) * 0.9);
  NNSC_RETURN_IF_ERROR(writeTokens(outDir + "/train.bin", chars, 0, split, stoi));
  NNSC_RETURN_IF_ERROR(writeTokens(outDir + "/val.bin", chars, split, chars.size(), stoi));
  nlohmann::json meta = {{"vocab_size", stoi.size()}, {"itos", itos}, {"stoi", stoiJson}};
  NNSC_RETURN_IF_ERROR(writeFileAtomic(outDir + "/meta.json", meta.dump(1) + "\n"));
  return PreparedData{int64_t(stoi.size()), int64_t(split), int64_t(chars.size() - split)};
}

} // namespace nnsc::rt
