// Jinja2 statements: text, `{{ expression }}` and the block tags (if, for, set, macro, call,
// filter, generation, break, continue), each with its own parse step; the expressions inside them
// are jinja_expression_parser's.
#include "jinja/jinja_parser.h"

#include <initializer_list>
#include <optional>

#include "base/error.h"
#include "base/named.h"
#include "jinja/jinja_expression_parser.h"

namespace grove::jinja {

namespace {

class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  Body ParseTemplate() {
    Body body = ParseBody({});
    if (Peek().kind != Token::Kind::kEnd) {
      // ParseBody stopped on an end tag nobody opened.
      Fail(Error(Peek().line, StrCat("unexpected '", Peek().text, "'")));
    }
    return body;
  }

 private:
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
        body.push_back(ParseOutput());
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

  // `{{ expression }}`.
  StmtPtr ParseOutput() {
    auto s = std::make_unique<Stmt>();
    s->kind = Stmt::Kind::kOutput;
    s->line = Next().line;
    s->exprs.push_back(ParseTuple());
    if (Peek().kind != Token::Kind::kVarEnd) {
      Fail(Error(Peek().line, StrCat("expected '}}', got ", Describe(Peek()))));
    }
    Next();
    return s;
  }

  // Reads `{% name %}` if it comes next (an `else` or `elif` that may follow a body).
  bool AcceptTag(std::string_view name) {
    if (Peek().kind != Token::Kind::kBlockBegin || !IsName(name, 1)) return false;
    Next();
    Next();
    return true;
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

  // The body after a tag's `%}`, then its end tag `{% end<tag> %}`.
  void ParseBlockBody(Stmt& s, std::string_view tag) {
    ExpectBlockEnd();
    const std::string end = StrCat("end", tag);
    s.bodies.push_back(ParseBody({end}));
    ExpectTag(end, s.line, tag);
  }

  StmtPtr ParseStatement() {
    using TagParser = void (Parser::*)(Stmt&);
    static constexpr Named<TagParser> kTags[] = {
        {&Parser::ParseIf, "if"},
        {&Parser::ParseFor, "for"},
        {&Parser::ParseSet, "set"},
        {&Parser::ParseMacro, "macro"},
        {&Parser::ParseCallBlock, "call"},
        {&Parser::ParseFilterBlock, "filter"},
        {&Parser::ParseGeneration, "generation"},
        {&Parser::ParseBreak, "break"},
        {&Parser::ParseContinue, "continue"},
    };
    const Token& tag = Next();
    const std::optional<TagParser> parse = FindNamed(kTags, tag.text);
    if (!parse) Fail(Error(tag.line, StrCat("unsupported tag '", tag.text, "'")));
    auto s = std::make_unique<Stmt>();
    s->line = tag.line;
    (this->*(*parse))(*s);
    ExpectBlockEnd();
    return s;
  }

  // transformers' AssistantTracker marks assistant text; rendering it is just its body.
  void ParseGeneration(Stmt& s) {
    s.kind = Stmt::Kind::kScope;
    ParseBlockBody(s, "generation");
  }
  void ParseBreak(Stmt& s) { s.kind = Stmt::Kind::kBreak; }
  void ParseContinue(Stmt& s) { s.kind = Stmt::Kind::kContinue; }

  void ParseIf(Stmt& s) {
    s.kind = Stmt::Kind::kIf;
    s.exprs.push_back(ParseTuple());
    ExpectBlockEnd();
    s.bodies.push_back(ParseBody({"elif", "else", "endif"}));
    while (AcceptTag("elif")) {
      s.exprs.push_back(ParseTuple());
      ExpectBlockEnd();
      s.bodies.push_back(ParseBody({"elif", "else", "endif"}));
    }
    if (AcceptTag("else")) {
      ExpectBlockEnd();
      s.bodies.push_back(ParseBody({"endif"}));
    }
    ExpectTag("endif", s.line, "if");
  }

  void ParseFor(Stmt& s) {
    s.kind = Stmt::Kind::kFor;
    s.targets = ParseTargets();
    if (!AcceptName("in")) {
      Fail(Error(Peek().line, StrCat("expected 'in', got ", Describe(Peek()))));
    }
    s.exprs.push_back(ParseTuple(/*with_condition=*/false));
    if (AcceptName("if")) s.exprs.push_back(ParseExpression());
    if (IsName("recursive")) Fail(Error(Peek().line, "unsupported 'recursive' loop"));
    ExpectBlockEnd();
    s.bodies.push_back(ParseBody({"else", "endfor"}));
    if (AcceptTag("else")) {
      ExpectBlockEnd();
      s.bodies.push_back(ParseBody({"endfor"}));
    }
    ExpectTag("endfor", s.line, "for");
  }

  // `set ns.attr = v`, `set a, b = v`, or a block `set x | filters %}...{% endset`.
  void ParseSet(Stmt& s) {
    if (Peek().kind == Token::Kind::kName && IsOp(".", 1)) {
      s.kind = Stmt::Kind::kSet;
      ExprPtr target = Make(Expr::Kind::kName, Peek().line);
      target->name = Next().text;
      Next();
      s.name = ExpectName();
      ExpectOp("=");
      s.exprs.push_back(ParseTuple());
      s.exprs.push_back(std::move(target));
      return;
    }
    s.targets = ParseTargets();
    if (AcceptOp("=")) {
      s.kind = Stmt::Kind::kSet;
      s.exprs.push_back(ParseTuple());
      return;
    }
    s.kind = Stmt::Kind::kSetBlock;
    if (IsOp("|")) {
      ExprPtr chain = FilterBody(Peek().line);
      while (AcceptOp("|")) chain = ParseFilterName(std::move(chain));
      s.exprs.push_back(std::move(chain));
    }
    ParseBlockBody(s, "set");
  }

  void ParseMacro(Stmt& s) {
    s.kind = Stmt::Kind::kMacro;
    s.name = ExpectName();
    ExpectOp("(");
    while (!AcceptOp(")")) {
      MacroParam param;
      param.name = ExpectName();
      if (AcceptOp("=")) param.default_value = ParseExpression();
      s.params.push_back(std::move(param));
      if (!IsOp(")")) ExpectOp(",");
    }
    ParseBlockBody(s, "macro");
    if (Peek().kind == Token::Kind::kName) Next();  // {% endmacro name %}
  }

  void ParseCallBlock(Stmt& s) {
    s.kind = Stmt::Kind::kCallBlock;
    if (IsOp("(")) Fail(Error(Peek().line, "unsupported 'call' with caller arguments"));
    s.exprs.push_back(ParseExpression());
    if (s.exprs[0]->kind != Expr::Kind::kCall) Fail(Error(s.line, "'call' needs a call"));
    ParseBlockBody(s, "call");
  }

  // `filter f(args) | g %}...{% endfilter`: the chain applied to the rendered body.
  void ParseFilterBlock(Stmt& s) {
    s.kind = Stmt::Kind::kFilterBlock;
    ExprPtr chain = ParseFilterName(FilterBody(s.line));
    while (AcceptOp("|")) chain = ParseFilterName(std::move(chain));
    s.exprs.push_back(std::move(chain));
    ParseBlockBody(s, "filter");
  }

  // The placeholder a filter chain over a rendered body starts from (the renderer binds it).
  static ExprPtr FilterBody(int line) {
    ExprPtr body = Make(Expr::Kind::kName, line);
    body->name = kFilterBodyName;
    return body;
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
};

}  // namespace

Body Parse(std::string_view source, const LexOptions& options) {
  return Parser(Lex(source, options)).ParseTemplate();
}

}  // namespace grove::jinja
