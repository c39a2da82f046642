//===- PreparedJsonNlohmann.cpp - PreparedJson with nlohmann-json ---------===//
//
// The tree is an ordered_json (the text's key order, as emitted), the
// printer nlohmann's own serializer kept with an output adapter over one
// string: printing a tree whose values fit that string appends within its
// capacity and formats numbers and strings in the serializer's fixed
// buffers, so it does not allocate.
//
//===----------------------------------------------------------------------===//

#define JSON_NOEXCEPTION
#include "io/PreparedJson.h"

#include <nlohmann/json.hpp>

#include <vector>

namespace fsdp::rt {
namespace {
using ordered = nlohmann::ordered_json;
using Serializer = nlohmann::detail::serializer<ordered>;
} // namespace

struct PreparedJson::Impl {
  ordered tree;
  std::vector<ordered *> slots;
  std::string text;
  std::unique_ptr<Serializer> printer;
  int indent = -1;
  bool newline = false;
};

PreparedJson::PreparedJson() : impl(std::make_unique<Impl>()) {}
PreparedJson::~PreparedJson() = default;

bool PreparedJson::prepare(const std::string &text, int indent, bool newline) {
  impl->tree = ordered::parse(text, nullptr, /*allow_exceptions=*/false);
  if (impl->tree.is_discarded())
    return false;
  impl->slots.clear();
  impl->indent = indent;
  impl->newline = newline;
  impl->printer = std::make_unique<Serializer>(
      nlohmann::detail::output_adapter<char, std::string>(impl->text), ' ',
      nlohmann::json::error_handler_t::replace);
  return true;
}

int PreparedJson::slot(const std::string &pointer) {
  ordered::json_pointer at(pointer);
  if (!impl->tree.contains(at))
    return -1;
  ordered &node = impl->tree[at];
  if (node.is_string())
    node.get_ref<std::string &>().reserve(24);
  else if (!node.is_number_integer())
    return -1;
  impl->slots.push_back(&node);
  return int(impl->slots.size()) - 1;
}

void PreparedJson::setNumber(int slot, uint64_t value) {
  *impl->slots[size_t(slot)] = value;
}

void PreparedJson::setString(int slot, const char *value) {
  impl->slots[size_t(slot)]->get_ref<std::string &>().assign(value);
}

void PreparedJson::reserve(size_t extra) {
  impl->text.reserve(print().size() + extra);
}

const std::string &PreparedJson::print(size_t multiple) {
  impl->text.clear();
  if (impl->indent >= 0)
    impl->printer->dump(impl->tree, true, false, unsigned(impl->indent));
  else
    impl->printer->dump(impl->tree, false, false, 0);
  if (impl->newline)
    impl->text.push_back('\n');
  while (multiple > 1 && impl->text.size() % multiple)
    impl->text.push_back(' ');
  return impl->text;
}

} // namespace fsdp::rt
