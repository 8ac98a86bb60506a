#include "nnsc/Runtime/PrepareData.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "nnsc/Support/File.h"

namespace nnsc::rt {

namespace {

// Decodes UTF-8; returns the byte offset of the first bad sequence or npos.
// Bad: a stray or missing continuation byte, an overlong form, a UTF-16
// surrogate (U+D800..U+DFFF, as CESU-8 writes them) or a value past U+10FFFF.
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
    static const uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kLeast[len] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
      return i;
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
  for (const char *name : {"train.bin", "val.bin", "meta.json"}) { // one would replace the text
    std::error_code ec;
    if (std::filesystem::equivalent(inputPath, std::filesystem::path(outDir) / name, ec))
      return errorf("{}: error: the input is {} of the output directory {}: write it elsewhere",
                    inputPath, name, outDir);
  }
  auto text = readFile(inputPath);
  if (!text)
    return text.status();
  std::vector<uint32_t> chars;
  size_t bad = decodeUtf8(*text, chars);
  if (bad != std::string::npos) {
    size_t line = 1 + size_t(std::count(text->begin(), text->begin() + long(bad), '\n'));
    size_t lineStart = text->rfind('\n', bad == 0 ? 0 : bad - 1);
    size_t column = lineStart == std::string::npos || bad == 0 ? bad + 1 : bad - lineStart;
    return errorf("{}:{}:{}: error: invalid UTF-8 at byte offset {} (byte 0x{:02x}); nothing "
                  "was written",
                  inputPath, line, column, bad, static_cast<unsigned char>((*text)[bad]));
  }
  if (chars.empty())
    return errorf("{}: error: input is empty; need some text to tokenize", inputPath);
  // 90 % of one character rounds down to no training token at all.
  if (chars.size() < 2)
    return errorf("{}: error: 1 character is too few: the training split (90 %) would be empty; "
                  "need at least 2",
                  inputPath);
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
  // Everything that can fail on the input happens before the first file is
  // replaced (each file is then written whole under a temporary name).
  nlohmann::json meta = {{"vocab_size", stoi.size()}, {"itos", itos}, {"stoi", stoiJson}};
  std::string metaText = meta.dump(1) + "\n";
  NNSC_RETURN_IF_ERROR(makeDirs(outDir));
  OutputTransaction outputs; // the three files replaced together, or none
  size_t split = static_cast<size_t>(double(chars.size()) * 0.9);
  NNSC_RETURN_IF_ERROR(writeTokens(outDir + "/train.bin", chars, 0, split, stoi));
  NNSC_RETURN_IF_ERROR(writeTokens(outDir + "/val.bin", chars, split, chars.size(), stoi));
  NNSC_RETURN_IF_ERROR(writeFileAtomic(outDir + "/meta.json", metaText));
  NNSC_RETURN_IF_ERROR(outputs.commit());
  return PreparedData{int64_t(stoi.size()), int64_t(split), int64_t(chars.size() - split)};
}

} // namespace nnsc::rt
