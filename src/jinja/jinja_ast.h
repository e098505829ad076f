// The syntax tree of a template: expressions and statements, each with its source line for errors.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/jinja_value.h"

namespace grove::jinja {

// The name under which a `{% filter %}` or filtered `{% set %}` block's rendered body is read.
inline constexpr const char* kFilterBodyName = "\x01filter body";

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // value
    kName,      // name
    kList,      // args
    kTuple,     // args (read as a list)
    kDict,      // args: key, value, key, value...
    kAttr,      // args[0] . name
    kItem,      // args[0] [ args[1] ]
    kSlice,     // args[0] [ args[1] : args[2] : args[3] ] (null where omitted)
    kCall,      // args[0] ( args[1..] , kwargs )
    kFilter,    // args[0] | name ( args[1..], kwargs )
    kTest,      // args[0] is [not] name ( args[1..] )
    kUnary,     // name ("-", "+", "not") args[0]
    kBinary,    // args[0] name args[1]: + - * / // % ** ~ == != < > <= >= in "not in"
    kAnd,       // args[0] and args[1]
    kOr,        // args[0] or args[1]
    kCondition  // args[0] if args[1] else args[2] (args[2] may be null)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  bool negated = false;  // `is not`
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ exprs[0] }}
    kIf,           // exprs: one condition per branch; bodies: one per branch, + else
    kFor,          // targets in exprs[0] (if exprs[1]); bodies[0], else bodies[1]
    kSet,          // targets = exprs[0], or attribute target (exprs[1] . name) = exprs[0]
    kSetBlock,     // targets[0] = rendered bodies[0] (optionally | filters: exprs[0] on a dummy)
    kMacro,        // name, params, bodies[0]
    kCallBlock,    // exprs[0] the call; bodies[0] is `caller()`
    kFilterBlock,  // bodies[0] rendered, then through exprs[0] (a filter chain over kName "")
    kBreak,
    kContinue,
    kScope,  // bodies[0] rendered as is ({% generation %})
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string name;
  std::vector<std::string> targets;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
  std::vector<MacroParam> params;
};

}  // namespace grove::jinja
