#include "jinja/jinja_expression_parser.h"

#include <charconv>
#include <cstdlib>

namespace grove::jinja {

std::string ExpressionParser::Error(int line, std::string_view what) const {
  return StrCat("chat template line ", line, ": ", what);
}

std::string ExpressionParser::Describe(const Token& t) const {
  switch (t.kind) {
    case Token::Kind::kEnd:
      return "end of template";
    case Token::Kind::kBlockEnd:
      return "'%}'";
    case Token::Kind::kVarEnd:
      return "'}}'";
    case Token::Kind::kString:
      return "a string";
    default:
      return StrCat("'", t.text, "'");
  }
}

void ExpressionParser::ExpectOp(std::string_view op) {
  if (!AcceptOp(op)) {
    Fail(Error(Peek().line, StrCat("expected '", op, "', got ", Describe(Peek()))));
  }
}

std::string ExpressionParser::ExpectName() {
  if (Peek().kind != Token::Kind::kName) {
    Fail(Error(Peek().line, StrCat("expected a name, got ", Describe(Peek()))));
  }
  return Next().text;
}

ExprPtr ExpressionParser::Make(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// An expression, or several separated by commas (a tuple), as in `set a, b = 1, 2`.
ExprPtr ExpressionParser::ParseTuple(bool with_condition) {
  int line = Peek().line;
  ExprPtr first = with_condition ? ParseExpression() : ParseOr();
  if (!IsOp(",")) return first;
  ExprPtr tuple = Make(Expr::Kind::kTuple, line);
  tuple->args.push_back(std::move(first));
  while (AcceptOp(",")) {
    if (Peek().kind == Token::Kind::kBlockEnd || Peek().kind == Token::Kind::kVarEnd) break;
    tuple->args.push_back(with_condition ? ParseExpression() : ParseOr());
  }
  return tuple;
}

ExprPtr ExpressionParser::ParseExpression() {
  Nest nest(*this);
  ExprPtr e = ParseOr();
  while (IsName("if")) {
    int line = Next().line;
    ExprPtr cond = Make(Expr::Kind::kCondition, line);
    cond->args.push_back(std::move(e));
    cond->args.push_back(ParseOr());
    cond->args.push_back(AcceptName("else") ? ParseExpression() : nullptr);
    e = std::move(cond);
  }
  return e;
}

ExprPtr ExpressionParser::ParseOr() {
  return ParseChain(&ExpressionParser::ParseAnd, Expr::Kind::kOr, {"or"});
}

ExprPtr ExpressionParser::ParseAnd() {
  return ParseChain(&ExpressionParser::ParseNot, Expr::Kind::kAnd, {"and"});
}

ExprPtr ExpressionParser::ParseNot() {
  if (IsName("not")) {
    Nest nest(*this);
    ExprPtr op = Make(Expr::Kind::kUnary, Next().line);
    op->name = "not";
    op->args.push_back(ParseNot());
    return op;
  }
  return ParseCompare();
}

ExprPtr ExpressionParser::Binary(std::string op, ExprPtr left, ExprPtr right, int line) {
  ExprPtr e = Make(Expr::Kind::kBinary, line);
  e->name = std::move(op);
  e->args.push_back(std::move(left));
  e->args.push_back(std::move(right));
  return e;
}

ExprPtr ExpressionParser::ParseCompare() {
  ExprPtr e = ParseMath1();
  while (true) {
    int line = Peek().line;
    if (Peek().kind == Token::Kind::kOp &&
        (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp(">") || IsOp("<=") || IsOp(">="))) {
      std::string op = Next().text;
      e = Binary(op, std::move(e), ParseMath1(), line);
    } else if (IsName("in")) {
      Next();
      e = Binary("in", std::move(e), ParseMath1(), line);
    } else if (IsName("not") && IsName("in", 1)) {
      Next();
      Next();
      e = Binary("not in", std::move(e), ParseMath1(), line);
    } else {
      return e;
    }
  }
}

ExprPtr ExpressionParser::ParseMath1() {
  return ParseChain(&ExpressionParser::ParseConcat, Expr::Kind::kBinary, {"+", "-"});
}

ExprPtr ExpressionParser::ParseConcat() {
  return ParseChain(&ExpressionParser::ParseMath2, Expr::Kind::kBinary, {"~"});
}

ExprPtr ExpressionParser::ParseMath2() {
  return ParseChain(&ExpressionParser::ParsePow, Expr::Kind::kBinary, {"*", "/", "//", "%"});
}

ExprPtr ExpressionParser::ParsePow() {
  return ParseChain(&ExpressionParser::ParseFiltered, Expr::Kind::kBinary, {"**"});
}

ExprPtr ExpressionParser::ParseFiltered() { return ParseUnary(/*with_filter=*/true); }

// `operand (op operand)*`, left-associative, for the operators `ops`: symbols (kBinary nodes named
// after the operator) or, for kAnd and kOr, the words `and` and `or`.
ExprPtr ExpressionParser::ParseChain(ExprPtr (ExpressionParser::*operand)(), Expr::Kind kind,
                                     std::initializer_list<std::string_view> ops) {
  ExprPtr e = (this->*operand)();
  while (true) {
    const auto op = std::find_if(ops.begin(), ops.end(), [&](std::string_view o) {
      return kind == Expr::Kind::kBinary ? IsOp(o) : IsName(o);
    });
    if (op == ops.end()) return e;
    ExprPtr node = Make(kind, Next().line);
    if (kind == Expr::Kind::kBinary) node->name = std::string(*op);
    node->args.push_back(std::move(e));
    node->args.push_back((this->*operand)());
    e = std::move(node);
  }
}

// As Jinja2: a sign binds looser than postfix operators but filters apply to the signed value.
ExprPtr ExpressionParser::ParseUnary(bool with_filter) {
  Nest nest(*this);
  ExprPtr e;
  if (IsOp("-") || IsOp("+")) {
    e = Make(Expr::Kind::kUnary, Peek().line);
    e->name = Next().text;
    e->args.push_back(ParseUnary(false));
  } else {
    e = ParsePrimary();
  }
  e = ParsePostfix(std::move(e));
  if (with_filter) e = ParseFilterExpr(std::move(e));
  return e;
}

ExprPtr ExpressionParser::ParsePrimary() {
  Nest nest(*this);
  const Token& t = Peek();
  switch (t.kind) {
    case Token::Kind::kName: {
      Next();
      if (t.text == "true" || t.text == "True") return Literal(Value::Bool(true), t.line);
      if (t.text == "false" || t.text == "False") return Literal(Value::Bool(false), t.line);
      if (t.text == "none" || t.text == "None") return Literal(Value::None(), t.line);
      ExprPtr e = Make(Expr::Kind::kName, t.line);
      e->name = t.text;
      return e;
    }
    case Token::Kind::kString: {  // adjacent literals join, as in Python
      int line = t.line;
      std::string s;
      while (Peek().kind == Token::Kind::kString) s += Next().text;
      return Literal(Value::String(std::move(s)), line);
    }
    case Token::Kind::kInt:
    case Token::Kind::kFloat:
      return ParseNumber();
    case Token::Kind::kOp:
      if (t.text == "(") return ParseParenthesized();
      if (t.text == "[") return ParseListLiteral();
      if (t.text == "{") return ParseDictLiteral();
      break;
    default:
      break;
  }
  Fail(Error(t.line, StrCat("unexpected ", Describe(t))));
}

// An integer too large for 64 bits reads as a float.
ExprPtr ExpressionParser::ParseNumber() {
  const Token& t = Next();
  if (t.kind == Token::Kind::kInt) {
    int64_t v = 0;
    auto res = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (res.ec == std::errc()) return Literal(Value::Int(v), t.line);
  }
  return Literal(Value::Float(std::strtod(t.text.c_str(), nullptr)), t.line);
}

// `(x)` is x; `()`, `(x,)` and `(x, y)` are tuples.
ExprPtr ExpressionParser::ParseParenthesized() {
  int line = Next().line;
  if (AcceptOp(")")) return Make(Expr::Kind::kTuple, line);
  ExprPtr first = ParseExpression();
  if (AcceptOp(")")) return first;
  ExprPtr tuple = Make(Expr::Kind::kTuple, line);
  tuple->args.push_back(std::move(first));
  while (AcceptOp(",")) {
    if (IsOp(")")) break;
    tuple->args.push_back(ParseExpression());
  }
  ExpectOp(")");
  return tuple;
}

ExprPtr ExpressionParser::ParseListLiteral() {
  ExprPtr list = Make(Expr::Kind::kList, Next().line);
  while (!AcceptOp("]")) {
    list->args.push_back(ParseExpression());
    if (!IsOp("]")) ExpectOp(",");
  }
  return list;
}

ExprPtr ExpressionParser::ParseDictLiteral() {
  ExprPtr dict = Make(Expr::Kind::kDict, Next().line);
  while (!AcceptOp("}")) {
    dict->args.push_back(ParseExpression());
    ExpectOp(":");
    dict->args.push_back(ParseExpression());
    if (!IsOp("}")) ExpectOp(",");
  }
  return dict;
}

ExprPtr ExpressionParser::Literal(Value v, int line) {
  ExprPtr e = Make(Expr::Kind::kLiteral, line);
  e->value = std::move(v);
  return e;
}

ExprPtr ExpressionParser::ParsePostfix(ExprPtr e) {
  while (true) {
    if (IsOp(".")) {
      int line = Next().line;
      ExprPtr attr = Make(Expr::Kind::kAttr, line);
      attr->args.push_back(std::move(e));
      if (Peek().kind == Token::Kind::kInt) {  // x.0 reads item 0, as in Jinja2
        attr->kind = Expr::Kind::kItem;
        const std::string& digits = Next().text;
        int64_t index = 0;
        auto res = std::from_chars(digits.data(), digits.data() + digits.size(), index);
        if (res.ec != std::errc()) Fail(Error(line, StrCat("index '", digits, "' too large")));
        attr->args.push_back(Literal(Value::Int(index), line));
      } else {
        attr->name = ExpectName();
      }
      e = std::move(attr);
    } else if (IsOp("[")) {
      e = ParseSubscript(std::move(e));
    } else if (IsOp("(")) {
      e = ParseCall(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr ExpressionParser::ParseSubscript(ExprPtr target) {
  int line = Next().line;  // [
  ExprPtr parts[3];
  int n_colons = 0;
  if (!IsOp(":")) parts[0] = ParseExpression();
  while (n_colons < 2 && AcceptOp(":")) {
    ++n_colons;
    if (!IsOp(":") && !IsOp("]")) parts[n_colons] = ParseExpression();
  }
  ExpectOp("]");
  if (n_colons == 0) {
    ExprPtr item = Make(Expr::Kind::kItem, line);
    item->args.push_back(std::move(target));
    item->args.push_back(std::move(parts[0]));
    return item;
  }
  ExprPtr slice = Make(Expr::Kind::kSlice, line);
  slice->args.push_back(std::move(target));
  for (ExprPtr& p : parts) slice->args.push_back(std::move(p));
  return slice;
}

// Call arguments into e (after args[0], which the caller filled).
void ExpressionParser::ParseArgs(Expr& e) {
  ExpectOp("(");
  while (!AcceptOp(")")) {
    if (IsOp("*") || IsOp("**")) Fail(Error(Peek().line, "unsupported '*' arguments"));
    if (Peek().kind == Token::Kind::kName && IsOp("=", 1)) {
      std::string key = Next().text;
      Next();
      e.kwargs.emplace_back(std::move(key), ParseExpression());
    } else {
      e.args.push_back(ParseExpression());
    }
    if (!IsOp(")")) ExpectOp(",");
  }
}

ExprPtr ExpressionParser::ParseCall(ExprPtr callee) {
  ExprPtr call = Make(Expr::Kind::kCall, Peek().line);
  call->args.push_back(std::move(callee));
  ParseArgs(*call);
  return call;
}

ExprPtr ExpressionParser::ParseFilterName(ExprPtr target) {
  ExprPtr f = Make(Expr::Kind::kFilter, Peek().line);
  f->name = ExpectName();
  while (AcceptOp(".")) f->name += "." + ExpectName();
  f->args.push_back(std::move(target));
  if (IsOp("(")) ParseArgs(*f);
  return f;
}

ExprPtr ExpressionParser::ParseFilterExpr(ExprPtr e) {
  while (true) {
    if (AcceptOp("|")) {
      e = ParseFilterName(std::move(e));
    } else if (IsName("is")) {
      e = ParseTest(std::move(e));
    } else if (IsOp("(")) {
      e = ParseCall(std::move(e));
    } else {
      return e;
    }
  }
}

// `target is [not] name`, with arguments in parentheses or one bare argument (`x is divisibleby
// 3`).
ExprPtr ExpressionParser::ParseTest(ExprPtr target) {
  int line = Next().line;  // is
  ExprPtr test = Make(Expr::Kind::kTest, line);
  test->negated = AcceptName("not");
  test->name = ExpectName();
  test->args.push_back(std::move(target));
  if (IsOp("(")) {
    ParseArgs(*test);
    return test;
  }
  const Token& t = Peek();
  bool starts_primary = t.kind == Token::Kind::kName || t.kind == Token::Kind::kString ||
                        t.kind == Token::Kind::kInt || t.kind == Token::Kind::kFloat || IsOp("[") ||
                        IsOp("{");
  if (starts_primary && !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) Fail(Error(t.line, "cannot chain tests with 'is'"));
    test->args.push_back(ParsePostfix(ParsePrimary()));
  }
  return test;
}

}  // namespace grove::jinja
