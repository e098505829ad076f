// Jinja2 expressions from a template's tokens (jinja_expression_parser.cc), by recursive descent
// with Jinja2's precedence: conditional, or, and, not, comparison, + -, ~, * / // %, **, sign,
// postfix (.attr [item] (call)), filters and tests. The statement parser (jinja_parser.cc) reads
// the tags around expressions with the same token cursor.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "jinja/jinja_ast.h"
#include "jinja/jinja_lexer.h"
#include "jinja/jinja_parser.h"

namespace grove::jinja {

class ExpressionParser {
 public:
  explicit ExpressionParser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

 protected:
  // Depth guard for the recursive descent.
  struct Nest {
    explicit Nest(ExpressionParser& p) : parser(p) {
      if (++parser.depth_ > kMaxParseDepth) {
        Fail(parser.Error(parser.Peek().line,
                          StrCat("nesting deeper than ", kMaxParseDepth, " levels")));
      }
    }
    ~Nest() { --parser.depth_; }
    ExpressionParser& parser;
  };

  // --- the token cursor ---------------------------------------------------------------------
  std::string Error(int line, std::string_view what) const;
  const Token& Peek(size_t ahead = 0) const {
    size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[i];
  }
  const Token& Next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool IsOp(std::string_view op, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kOp && Peek(ahead).text == op;
  }
  bool IsName(std::string_view name, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kName && Peek(ahead).text == name;
  }
  bool AcceptOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool AcceptName(std::string_view name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }
  std::string Describe(const Token& t) const;
  void ExpectOp(std::string_view op);
  std::string ExpectName();

  // --- expressions --------------------------------------------------------------------------
  static ExprPtr Make(Expr::Kind kind, int line);
  // An expression, or several separated by commas (a tuple), as in `set a, b = 1, 2`; without
  // the condition (`x if c else y`) where an `if` follows, as in `for x in xs if c`.
  ExprPtr ParseTuple(bool with_condition = true);
  ExprPtr ParseExpression();
  // `name(args)` of a filter (the `|` already read) applied to target.
  ExprPtr ParseFilterName(ExprPtr target);

 private:
  ExprPtr ParseOr();
  ExprPtr ParseAnd();
  ExprPtr ParseNot();
  static ExprPtr Binary(std::string op, ExprPtr left, ExprPtr right, int line);
  ExprPtr ParseCompare();
  ExprPtr ParseMath1();
  ExprPtr ParseConcat();
  ExprPtr ParseMath2();
  ExprPtr ParsePow();
  ExprPtr ParseFiltered();
  ExprPtr ParseChain(ExprPtr (ExpressionParser::*operand)(), Expr::Kind kind,
                     std::initializer_list<std::string_view> ops);
  ExprPtr ParseUnary(bool with_filter);
  ExprPtr ParsePrimary();
  ExprPtr ParseNumber();
  ExprPtr ParseParenthesized();
  ExprPtr ParseListLiteral();
  ExprPtr ParseDictLiteral();
  static ExprPtr Literal(Value v, int line);
  ExprPtr ParsePostfix(ExprPtr e);
  ExprPtr ParseSubscript(ExprPtr target);
  void ParseArgs(Expr& e);
  ExprPtr ParseCall(ExprPtr callee);
  ExprPtr ParseFilterExpr(ExprPtr e);
  ExprPtr ParseTest(ExprPtr target);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace grove::jinja
