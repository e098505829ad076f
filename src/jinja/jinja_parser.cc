#include "jinja/jinja_parser.h"

#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "base/error.h"

namespace grove::jinja {

namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body ParseTemplate() {
    Body body = ParseBody({});
    if (Peek().kind != Token::Kind::kEnd) {
      // ParseBody stopped on an end tag nobody opened.
      Fail(Error(Peek().line, StrCat("unexpected '", Peek().text, "'")));
    }
    return body;
  }

 private:
  // Depth guard for the recursive descent.
  struct Nest {
    explicit Nest(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxParseDepth) {
        Fail(parser.Error(parser.Peek().line,
                          StrCat("nesting deeper than ", kMaxParseDepth, " levels")));
      }
    }
    ~Nest() { --parser.depth_; }
    Parser& parser;
  };

  std::string Error(int line, std::string_view what) const {
    return StrCat("chat template line ", line, ": ", what);
  }
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
  std::string Describe(const Token& t) const {
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
  void ExpectOp(std::string_view op) {
    if (!AcceptOp(op)) {
      Fail(Error(Peek().line, StrCat("expected '", op, "', got ", Describe(Peek()))));
    }
  }
  std::string ExpectName() {
    if (Peek().kind != Token::Kind::kName) {
      Fail(Error(Peek().line, StrCat("expected a name, got ", Describe(Peek()))));
    }
    return Next().text;
  }
  void ExpectBlockEnd() {
    if (Peek().kind != Token::Kind::kBlockEnd) {
      Fail(Error(Peek().line, StrCat("expected '%}', got ", Describe(Peek()))));
    }
    Next();
  }

  // Statements up to a block tag whose name is in `stops` (left unread: the caller reads it).
  Body ParseBody(std::initializer_list<std::string_view> stops) {
    Nest nest(*this);
    Body body;
    while (true) {
      const Token& t = Peek();
      if (t.kind == Token::Kind::kEnd) return body;
      if (t.kind == Token::Kind::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = t.line;
        s->text = Next().text;
        body.push_back(std::move(s));
      } else if (t.kind == Token::Kind::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = Next().line;
        s->exprs.push_back(ParseTuple());
        if (Peek().kind != Token::Kind::kVarEnd) {
          Fail(Error(Peek().line, StrCat("expected '}}', got ", Describe(Peek()))));
        }
        Next();
        body.push_back(std::move(s));
      } else if (t.kind == Token::Kind::kBlockBegin) {
        const Token& name = Peek(1);
        if (name.kind != Token::Kind::kName) {
          Fail(Error(name.line, StrCat("expected a tag name, got ", Describe(name))));
        }
        for (std::string_view stop : stops) {
          if (name.text == stop) return body;
        }
        if (name.text.rfind("end", 0) == 0 || name.text == "elif" || name.text == "else") {
          if (stops.size() == 0) Fail(Error(name.line, StrCat("unexpected '", name.text, "'")));
          return body;  // the caller reports the mismatch
        }
        Next();
        body.push_back(ParseStatement());
      } else {
        Fail(Error(t.line, StrCat("unexpected ", Describe(t))));
      }
    }
  }

  // Reads `{% name` ... and checks it is the expected end tag.
  void ExpectTag(std::string_view name, int opened_line, std::string_view opened) {
    if (Peek().kind != Token::Kind::kBlockBegin || !IsName(name, 1)) {
      std::string got = Peek().kind == Token::Kind::kEnd ? "end of template" : Describe(Peek(1));
      Fail(Error(Peek().line, StrCat("expected '", name, "' to close '", opened, "' of line ",
                                     opened_line, ", got ", got)));
    }
    Next();
    Next();
  }

  StmtPtr ParseStatement() {
    const Token& tag = Next();
    auto s = std::make_unique<Stmt>();
    s->line = tag.line;
    const std::string& name = tag.text;
    if (name == "if") {
      s->kind = Stmt::Kind::kIf;
      s->exprs.push_back(ParseTuple());
      ExpectBlockEnd();
      while (true) {
        s->bodies.push_back(ParseBody({"elif", "else", "endif"}));
        if (Peek().kind == Token::Kind::kBlockBegin && IsName("elif", 1)) {
          Next();
          Next();
          s->exprs.push_back(ParseTuple());
          ExpectBlockEnd();
          continue;
        }
        if (Peek().kind == Token::Kind::kBlockBegin && IsName("else", 1)) {
          Next();
          Next();
          ExpectBlockEnd();
          s->bodies.push_back(ParseBody({"endif"}));
        }
        ExpectTag("endif", s->line, "if");
        ExpectBlockEnd();
        return s;
      }
    }
    if (name == "for") {
      s->kind = Stmt::Kind::kFor;
      s->targets = ParseTargets();
      if (!AcceptName("in")) {
        Fail(Error(Peek().line, StrCat("expected 'in', got ", Describe(Peek()))));
      }
      s->exprs.push_back(ParseTuple(/*with_condition=*/false));
      if (AcceptName("if")) s->exprs.push_back(ParseExpression());
      if (IsName("recursive")) Fail(Error(Peek().line, "unsupported 'recursive' loop"));
      ExpectBlockEnd();
      s->bodies.push_back(ParseBody({"else", "endfor"}));
      if (Peek().kind == Token::Kind::kBlockBegin && IsName("else", 1)) {
        Next();
        Next();
        ExpectBlockEnd();
        s->bodies.push_back(ParseBody({"endfor"}));
      }
      ExpectTag("endfor", s->line, "for");
      ExpectBlockEnd();
      return s;
    }
    if (name == "set") {
      if (Peek().kind == Token::Kind::kName && IsOp(".", 1)) {
        s->kind = Stmt::Kind::kSet;
        auto target = std::make_unique<Expr>();
        target->kind = Expr::Kind::kName;
        target->line = Peek().line;
        target->name = Next().text;
        Next();
        s->name = ExpectName();
        ExpectOp("=");
        s->exprs.push_back(ParseTuple());
        s->exprs.push_back(std::move(target));
        ExpectBlockEnd();
        return s;
      }
      s->targets = ParseTargets();
      if (AcceptOp("=")) {
        s->kind = Stmt::Kind::kSet;
        s->exprs.push_back(ParseTuple());
        ExpectBlockEnd();
        return s;
      }
      s->kind = Stmt::Kind::kSetBlock;
      if (IsOp("|")) s->exprs.push_back(ParseFilterChain());
      ExpectBlockEnd();
      s->bodies.push_back(ParseBody({"endset"}));
      ExpectTag("endset", s->line, "set");
      ExpectBlockEnd();
      return s;
    }
    if (name == "macro") {
      s->kind = Stmt::Kind::kMacro;
      s->name = ExpectName();
      ExpectOp("(");
      while (!AcceptOp(")")) {
        MacroParam param;
        param.name = ExpectName();
        if (AcceptOp("=")) param.default_value = ParseExpression();
        s->params.push_back(std::move(param));
        if (!IsOp(")")) ExpectOp(",");
      }
      ExpectBlockEnd();
      s->bodies.push_back(ParseBody({"endmacro"}));
      ExpectTag("endmacro", s->line, "macro");
      if (Peek().kind == Token::Kind::kName) Next();  // {% endmacro name %}
      ExpectBlockEnd();
      return s;
    }
    if (name == "call") {
      s->kind = Stmt::Kind::kCallBlock;
      if (IsOp("(")) Fail(Error(Peek().line, "unsupported 'call' with caller arguments"));
      s->exprs.push_back(ParseExpression());
      if (s->exprs[0]->kind != Expr::Kind::kCall) Fail(Error(s->line, "'call' needs a call"));
      ExpectBlockEnd();
      s->bodies.push_back(ParseBody({"endcall"}));
      ExpectTag("endcall", s->line, "call");
      ExpectBlockEnd();
      return s;
    }
    if (name == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      auto body_value = std::make_unique<Expr>();
      body_value->kind = Expr::Kind::kName;
      body_value->line = s->line;
      body_value->name = kFilterBodyName;
      ExprPtr chain = ParseFilterName(std::move(body_value));
      while (AcceptOp("|")) chain = ParseFilterName(std::move(chain));
      s->exprs.push_back(std::move(chain));
      ExpectBlockEnd();
      s->bodies.push_back(ParseBody({"endfilter"}));
      ExpectTag("endfilter", s->line, "filter");
      ExpectBlockEnd();
      return s;
    }
    if (name == "generation") {
      // transformers' AssistantTracker marks assistant text; rendering it is just its body.
      s->kind = Stmt::Kind::kScope;
      ExpectBlockEnd();
      s->bodies.push_back(ParseBody({"endgeneration"}));
      ExpectTag("endgeneration", s->line, "generation");
      ExpectBlockEnd();
      return s;
    }
    if (name == "break" || name == "continue") {
      s->kind = name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      ExpectBlockEnd();
      return s;
    }
    Fail(Error(tag.line, StrCat("unsupported tag '", name, "'")));
  }

  std::vector<std::string> ParseTargets() {
    std::vector<std::string> names;
    bool paren = AcceptOp("(");
    names.push_back(ExpectName());
    while (AcceptOp(",")) {
      if (paren && IsOp(")")) break;
      names.push_back(ExpectName());
    }
    if (paren) ExpectOp(")");
    return names;
  }

  // `| f(args) | g` applied to a placeholder the statement fills (set blocks).
  ExprPtr ParseFilterChain() {
    auto body_value = std::make_unique<Expr>();
    body_value->kind = Expr::Kind::kName;
    body_value->line = Peek().line;
    body_value->name = kFilterBodyName;
    ExprPtr chain = std::move(body_value);
    while (AcceptOp("|")) chain = ParseFilterName(std::move(chain));
    return chain;
  }

  ExprPtr Make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // An expression, or several separated by commas (a tuple), as in `set a, b = 1, 2`.
  ExprPtr ParseTuple(bool with_condition = true) {
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

  ExprPtr ParseExpression() {
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

  ExprPtr ParseOr() {
    ExprPtr e = ParseAnd();
    while (IsName("or")) {
      ExprPtr op = Make(Expr::Kind::kOr, Next().line);
      op->args.push_back(std::move(e));
      op->args.push_back(ParseAnd());
      e = std::move(op);
    }
    return e;
  }

  ExprPtr ParseAnd() {
    ExprPtr e = ParseNot();
    while (IsName("and")) {
      ExprPtr op = Make(Expr::Kind::kAnd, Next().line);
      op->args.push_back(std::move(e));
      op->args.push_back(ParseNot());
      e = std::move(op);
    }
    return e;
  }

  ExprPtr ParseNot() {
    if (IsName("not")) {
      Nest nest(*this);
      ExprPtr op = Make(Expr::Kind::kUnary, Next().line);
      op->name = "not";
      op->args.push_back(ParseNot());
      return op;
    }
    return ParseCompare();
  }

  ExprPtr Binary(std::string op, ExprPtr left, ExprPtr right, int line) {
    ExprPtr e = Make(Expr::Kind::kBinary, line);
    e->name = std::move(op);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr ParseCompare() {
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

  ExprPtr ParseMath1() {
    ExprPtr e = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      int line = Peek().line;
      std::string op = Next().text;
      e = Binary(op, std::move(e), ParseConcat(), line);
    }
    return e;
  }

  ExprPtr ParseConcat() {
    ExprPtr e = ParseMath2();
    while (IsOp("~")) {
      int line = Next().line;
      e = Binary("~", std::move(e), ParseMath2(), line);
    }
    return e;
  }

  ExprPtr ParseMath2() {
    ExprPtr e = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      int line = Peek().line;
      std::string op = Next().text;
      e = Binary(op, std::move(e), ParsePow(), line);
    }
    return e;
  }

  ExprPtr ParsePow() {
    ExprPtr e = ParseUnary(true);
    while (IsOp("**")) {
      int line = Next().line;
      e = Binary("**", std::move(e), ParseUnary(true), line);
    }
    return e;
  }

  // As Jinja2: a sign binds looser than postfix operators but filters apply to the signed value.
  ExprPtr ParseUnary(bool with_filter) {
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

  ExprPtr ParsePrimary() {
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
      case Token::Kind::kString: {
        int line = t.line;
        std::string s;
        while (Peek().kind == Token::Kind::kString) s += Next().text;
        return Literal(Value::String(std::move(s)), line);
      }
      case Token::Kind::kInt: {
        Next();
        int64_t v = 0;
        auto res = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (res.ec != std::errc())
          return Literal(Value::Float(std::strtod(t.text.c_str(), nullptr)), t.line);
        return Literal(Value::Int(v), t.line);
      }
      case Token::Kind::kFloat:
        Next();
        return Literal(Value::Float(std::strtod(t.text.c_str(), nullptr)), t.line);
      case Token::Kind::kOp:
        if (t.text == "(") {
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
        if (t.text == "[") {
          ExprPtr list = Make(Expr::Kind::kList, Next().line);
          while (!AcceptOp("]")) {
            list->args.push_back(ParseExpression());
            if (!IsOp("]")) ExpectOp(",");
          }
          return list;
        }
        if (t.text == "{") {
          ExprPtr dict = Make(Expr::Kind::kDict, Next().line);
          while (!AcceptOp("}")) {
            dict->args.push_back(ParseExpression());
            ExpectOp(":");
            dict->args.push_back(ParseExpression());
            if (!IsOp("}")) ExpectOp(",");
          }
          return dict;
        }
        break;
      default:
        break;
    }
    Fail(Error(t.line, StrCat("unexpected ", Describe(t))));
  }

  ExprPtr Literal(Value v, int line) {
    ExprPtr e = Make(Expr::Kind::kLiteral, line);
    e->value = std::move(v);
    return e;
  }

  ExprPtr ParsePostfix(ExprPtr e) {
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

  ExprPtr ParseSubscript(ExprPtr target) {
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
  void ParseArgs(Expr& e) {
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

  ExprPtr ParseCall(ExprPtr callee) {
    ExprPtr call = Make(Expr::Kind::kCall, Peek().line);
    call->args.push_back(std::move(callee));
    ParseArgs(*call);
    return call;
  }

  ExprPtr ParseFilterName(ExprPtr target) {
    ExprPtr f = Make(Expr::Kind::kFilter, Peek().line);
    f->name = ExpectName();
    while (AcceptOp(".")) f->name += "." + ExpectName();
    f->args.push_back(std::move(target));
    if (IsOp("(")) ParseArgs(*f);
    return f;
  }

  ExprPtr ParseFilterExpr(ExprPtr e) {
    while (true) {
      if (AcceptOp("|")) {
        e = ParseFilterName(std::move(e));
      } else if (IsName("is")) {
        int line = Next().line;
        ExprPtr test = Make(Expr::Kind::kTest, line);
        test->negated = AcceptName("not");
        test->name = ExpectName();
        test->args.push_back(std::move(e));
        if (IsOp("(")) {
          ParseArgs(*test);
        } else {
          const Token& t = Peek();
          bool starts_primary = t.kind == Token::Kind::kName || t.kind == Token::Kind::kString ||
                                t.kind == Token::Kind::kInt || t.kind == Token::Kind::kFloat ||
                                IsOp("[") || IsOp("{");
          if (starts_primary && !IsName("else") && !IsName("or") && !IsName("and")) {
            if (IsName("is")) Fail(Error(t.line, "cannot chain tests with 'is'"));
            test->args.push_back(ParsePostfix(ParsePrimary()));
          }
        }
        e = std::move(test);
      } else if (IsOp("(")) {
        e = ParseCall(std::move(e));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body Parse(std::string_view source, const LexOptions& options) {
  return Parser(Lex(source, options)).ParseTemplate();
}

}  // namespace grove::jinja
