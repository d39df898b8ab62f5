#include "core/yaml_value.hpp"

#include <yaml.h>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/string.hpp>

#include "fiber/error.hpp"

namespace fiber::detail {
namespace {

// libyaml's C objects, released however the conversion leaves.
struct parser_guard {
  yaml_parser_t p{};
  parser_guard() {
    if (!yaml_parser_initialize(&p)) throw error(errc::config_error, "libyaml could not start a parser (out of memory)");
  }
  ~parser_guard() { yaml_parser_delete(&p); }
  parser_guard(const parser_guard&) = delete;
  parser_guard& operator=(const parser_guard&) = delete;
};
struct document_guard {
  yaml_document_t d{};
  bool loaded = false;
  document_guard() = default;
  ~document_guard() {
    if (loaded) yaml_document_delete(&d);
  }
  document_guard(const document_guard&) = delete;
  document_guard& operator=(const document_guard&) = delete;
};

class converter {
 public:
  converter(yaml_document_t& doc, const std::string& what, std::size_t max_nodes, std::size_t max_depth)
      : doc_(doc), what_(what), max_nodes_(max_nodes), max_depth_(max_depth) {}

  boost::json::value convert(const yaml_node_t& node, std::size_t depth) {
    if (++nodes_ > max_nodes_)
      throw error(errc::config_error, what_ + " expands past " + std::to_string(max_nodes_) +
                                          " nodes (aliases repeating aliases?): write it out without them");
    if (depth > max_depth_)
      throw error(errc::config_error, what_ + " nests deeper than " + std::to_string(max_depth_) +
                                          " levels (an alias that refers to itself?) at line " + line_of(node));
    switch (node.type) {
      case YAML_SCALAR_NODE:
        return boost::json::string(reinterpret_cast<const char*>(node.data.scalar.value), node.data.scalar.length);
      case YAML_SEQUENCE_NODE: {
        boost::json::array out;
        for (auto* item = node.data.sequence.items.start; item != node.data.sequence.items.top; ++item)
          out.push_back(convert(at(*item), depth + 1));
        return out;
      }
      case YAML_MAPPING_NODE: {
        boost::json::object out;
        for (auto* pair = node.data.mapping.pairs.start; pair != node.data.mapping.pairs.top; ++pair) {
          const yaml_node_t& key = at(pair->key);
          if (key.type != YAML_SCALAR_NODE)
            throw error(errc::config_error,
                        what_ + " has a key that is not a plain value at line " + line_of(key) + ": write it as text");
          std::string_view name(reinterpret_cast<const char*>(key.data.scalar.value), key.data.scalar.length);
          out[name] = convert(at(pair->value), depth + 1);
        }
        return out;
      }
      case YAML_NO_NODE:
        break;
    }
    return nullptr;
  }

 private:
  const yaml_node_t& at(int index) {
    const yaml_node_t* n = yaml_document_get_node(&doc_, index);
    if (n == nullptr) throw error(errc::config_error, what_ + " refers to a node it does not hold");
    return *n;
  }
  static std::string line_of(const yaml_node_t& node) { return std::to_string(node.start_mark.line + 1); }

  yaml_document_t& doc_;
  const std::string& what_;
  std::size_t max_nodes_;
  std::size_t max_depth_;
  std::size_t nodes_ = 0;
};

}  // namespace

boost::json::value parse_yaml(std::string_view text, const std::string& what, std::size_t max_nodes,
                              std::size_t max_depth) {
  parser_guard parser;
  yaml_parser_set_input_string(&parser.p, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  document_guard doc;
  if (!yaml_parser_load(&parser.p, &doc.d)) {
    std::string where;
    if (parser.p.problem_mark.line || parser.p.problem_mark.column)
      where = " at line " + std::to_string(parser.p.problem_mark.line + 1) + ", column " +
              std::to_string(parser.p.problem_mark.column + 1);
    std::string context = parser.p.context ? std::string(" ") + parser.p.context : std::string();
    throw error(errc::config_error, what + " is not valid YAML" + where + ": " +
                                        (parser.p.problem ? parser.p.problem : "unreadable") + context);
  }
  doc.loaded = true;
  const yaml_node_t* root = yaml_document_get_root_node(&doc.d);
  if (root == nullptr) return nullptr;
  return converter(doc.d, what, max_nodes, max_depth).convert(*root, 0);
}

}  // namespace fiber::detail
