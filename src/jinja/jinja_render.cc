#include "jinja/jinja_render.h"

#include <algorithm>
#include <unordered_map>

#include "jinja/jinja_builtins.h"
#include "jinja/jinja_int.h"
#include "jinja/jinja_operators.h"
#include "jinja/jinja_parser.h"

namespace grove::jinja {

namespace {

using Frame = std::unordered_map<std::string, Value>;

// The `loop` variable of iteration i over items (Jinja2's LoopContext, without recursion).
Value LoopVariable(const ValueList& items, int64_t i) {
  const int64_t n = static_cast<int64_t>(items.size());
  Value loop = Value::Dict();
  ValueDict& d = *loop.dict;
  d.items.reserve(12);
  d.items.emplace_back("index", Value::Int(i + 1));
  d.items.emplace_back("index0", Value::Int(i));
  d.items.emplace_back("revindex", Value::Int(n - i));
  d.items.emplace_back("revindex0", Value::Int(n - i - 1));
  d.items.emplace_back("first", Value::Bool(i == 0));
  d.items.emplace_back("last", Value::Bool(i == n - 1));
  d.items.emplace_back("length", Value::Int(n));
  d.items.emplace_back("depth", Value::Int(1));
  d.items.emplace_back("depth0", Value::Int(0));
  d.items.emplace_back("previtem",
                       i > 0 ? items[static_cast<size_t>(i - 1)] : Value::Undefined("previtem"));
  d.items.emplace_back(
      "nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::Undefined("nextitem"));
  d.items.emplace_back("cycle", Value::Func([i](CallArgs& a) {
                         if (a.positional.empty()) ValueFail("loop.cycle() needs arguments");
                         return a.positional[static_cast<size_t>(i) % a.positional.size()];
                       }));
  return loop;
}

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const ValueDict& globals, const RenderLimits& limits)
      : limits_(limits), budget_(limits) {
    Frame root;
    for (const auto& [k, v] : globals.items) root[k] = v;
    AddBuiltins(root);
    frames_.push_back(std::move(root));
    chain_.push_back(0);
  }

  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;
  // A namespace can hold itself, directly or through a list (the only cycle a sandboxed template
  // can make); the values are reference-counted, so each namespace's attributes are dropped at the
  // end of the render, when no value of it is used any more, or the cycle would never be freed.
  ~Renderer() {
    for (const std::weak_ptr<ValueDict>& made : namespaces_) {
      if (const std::shared_ptr<ValueDict> ns = made.lock()) ns->items.clear();
    }
  }

  std::string Run(const Body& body) {
    std::string out;
    out_ = &out;
    stack_base_ = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    ExecBody(body);
    return out;
  }

 private:
  // --- scopes -------------------------------------------------------------------------------
  // frames_ holds every live frame; chain_ the ones visible now, innermost last (a macro sees
  // the template's top level and its own frame, not its caller's loops).
  Value Lookup(const std::string& name) const {
    for (size_t i = chain_.size(); i-- > 0;) {
      const Frame& f = frames_[chain_[i]];
      auto it = f.find(name);
      if (it != f.end()) return it->second;
    }
    return Value::Undefined(name);
  }
  void Assign(const std::string& name, Value v) { frames_[chain_.back()][name] = std::move(v); }
  void PushFrame() {
    frames_.emplace_back();
    chain_.push_back(frames_.size() - 1);
  }
  void PopFrame() {
    chain_.pop_back();
    frames_.pop_back();
  }

  void AddBuiltins(Frame& root) {
    size_t max_steps = static_cast<size_t>(limits_.max_steps);
    root["range"] = Value::Func([max_steps](CallArgs& a) {
      int64_t start = 0, stop = 0, step = 1;
      for (const Value& v : a.positional) {
        if (!IsIntLike(v)) ValueFail("range() needs integers, got ", TypeName(v));
      }
      if (a.positional.size() == 1) {
        stop = a.positional[0].AsInt();
      } else if (a.positional.size() >= 2) {
        start = a.positional[0].AsInt();
        stop = a.positional[1].AsInt();
        if (a.positional.size() >= 3) step = a.positional[2].AsInt();
      } else {
        ValueFail("range() needs 1 to 3 arguments");
      }
      if (step == 0) ValueFail("range() step must not be zero");
      const uint64_t count = RangeLength(start, stop, step);
      if (count > max_steps) {
        ValueFail("range of ", count, " items is more than the step limit (", max_steps, ")");
      }
      CheckRoom(static_cast<size_t>(count) * sizeof(Value), "range");
      ValueList items;
      items.reserve(static_cast<size_t>(count));
      for (uint64_t k = 0; k < count; ++k) items.push_back(Value::Int(RangeItem(start, step, k)));
      return Value::List(std::move(items));
    });
    root["namespace"] = Value::Func([this](CallArgs& a) {
      Value ns = Value::Dict();
      ns.dict->is_namespace = true;
      namespaces_.push_back(ns.dict);
      for (const Value& p : a.positional) {
        if (!p.is_dict()) ValueFail("namespace() takes a dict or keyword arguments");
        for (const auto& [k, v] : p.dict->items) ns.dict->Set(k, v);
      }
      for (auto& [k, v] : a.keywords) ns.dict->Set(k, v);
      return ns;
    });
    root["dict"] = Value::Func([](CallArgs& a) {
      Value d = Value::Dict();
      for (const Value& p : a.positional) {
        if (!p.is_dict()) ValueFail("dict() takes a dict or keyword arguments");
        for (const auto& [k, v] : p.dict->items) d.dict->Set(k, v);
      }
      for (auto& [k, v] : a.keywords) d.dict->Set(k, v);
      return d;
    });
  }

  // --- limits (jinja_budget.h) -------------------------------------------------------------
  // Counted at every expression and statement, so the hot path is a count and a compare; every
  // 16th step the rest is checked out of line: the step limit, the stack (evaluation nests at
  // most a level a step, a few hundred bytes) and, every 256th, the clock.
  void Step(int line) {
    if (++steps_ >= next_check_) CheckLimits(line);
  }
  // Out of line, so that only this function keeps a frame pointer: the frame address is the real
  // stack even where a sanitizer keeps locals elsewhere. The stack grows down from Run's frame.
  [[gnu::noinline]] void CheckLimits(int line) {
    if (steps_ > limits_.max_steps) {
      Fail("chat template line ", line, ": more than ", limits_.max_steps,
           " steps (a loop that does not end?)");
    }
    next_check_ = std::min(steps_ + 16, limits_.max_steps + 1);
    const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    if (here < stack_base_ && stack_base_ - here > limits_.max_stack_bytes) {
      Fail("chat template line ", line, ": nested too deeply (evaluation took more than ",
           limits_.max_stack_bytes, " bytes of stack)");
    }
    if (++checks_ % 16 == 0) Guarded(line, [this] { budget_.CheckDeadline(); });
  }
  void Emit(std::string_view s, int line) {
    Guarded(line, [&] { budget_.Charge(s.size()); });
    out_->append(s);
    if (out_->size() > limits_.max_output_bytes) {
      Fail("chat template line ", line, ": output longer than ", limits_.max_output_bytes,
           " bytes");
    }
  }
  // What an evaluation made (jinja_budget.h): a string's bytes (a name's string is a copy too),
  // and the items of a list or dict that the expression built (a name's list is shared; the
  // strings among the items were charged as they were evaluated, or are pieces of one that was).
  void ChargeResult(const Expr& e, const Value& v) {
    if (v.is_string()) {
      budget_.Charge(v.text.size());
    } else if (v.is_list() && Builds(e.kind)) {
      budget_.Charge(v.list->size() * sizeof(Value));
    } else if (v.is_dict() && Builds(e.kind)) {
      budget_.Charge(v.dict->items.size() * sizeof(std::pair<std::string, Value>));
    }
  }
  static bool Builds(Expr::Kind kind) {
    return kind == Expr::Kind::kList || kind == Expr::Kind::kTuple || kind == Expr::Kind::kDict ||
           kind == Expr::Kind::kSlice || kind == Expr::Kind::kCall || kind == Expr::Kind::kFilter ||
           kind == Expr::Kind::kBinary;
  }

  // --- statements ---------------------------------------------------------------------------
  Flow ExecBody(const Body& body) {
    for (const StmtPtr& s : body) {
      Flow f = Exec(*s);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow Exec(const Stmt& s) {
    Step(s.line);
    switch (s.kind) {
      case Stmt::Kind::kText:
        Emit(s.text, s.line);
        return Flow::kNormal;
      case Stmt::Kind::kOutput:
        EmitValue(Eval(*s.exprs[0]), s.line);
        return Flow::kNormal;
      case Stmt::Kind::kIf:
        for (size_t i = 0; i < s.exprs.size(); ++i) {
          if (Truthy(Eval(*s.exprs[i]))) return ExecBody(s.bodies[i]);
        }
        if (s.bodies.size() > s.exprs.size()) return ExecBody(s.bodies.back());
        return Flow::kNormal;
      case Stmt::Kind::kFor:
        ExecFor(s);
        return Flow::kNormal;
      case Stmt::Kind::kSet:
        ExecSet(s);
        return Flow::kNormal;
      case Stmt::Kind::kSetBlock: {
        Value text = Value::String(Capture(s.bodies[0]));
        if (!s.exprs.empty()) text = EvalWithBody(*s.exprs[0], std::move(text));
        Assign(s.targets[0], std::move(text));
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro:
        Assign(s.name, MakeMacro(s));
        return Flow::kNormal;
      case Stmt::Kind::kCallBlock: {
        const Expr& call = *s.exprs[0];
        Value caller =
            Value::Func([this, &s](CallArgs&) { return Value::String(Capture(s.bodies[0])); });
        CallArgs args = EvalArgs(call);
        args.keywords.emplace_back("caller", std::move(caller));
        EmitValue(Guarded(call.line, [&] { return CallValue(Eval(*call.args[0]), args); }), s.line);
        return Flow::kNormal;
      }
      case Stmt::Kind::kFilterBlock:
        EmitValue(EvalWithBody(*s.exprs[0], Value::String(Capture(s.bodies[0]))), s.line);
        return Flow::kNormal;
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
      case Stmt::Kind::kScope:
        return ExecBody(s.bodies[0]);
    }
    return Flow::kNormal;
  }

  std::string Capture(const Body& body) {
    std::string buffer;
    std::string* saved = out_;
    out_ = &buffer;
    try {
      ExecBody(body);
    } catch (...) {
      out_ = saved;
      throw;
    }
    out_ = saved;
    return buffer;
  }

  Value EvalWithBody(const Expr& chain, Value body) {
    PushFrame();
    Assign(kFilterBodyName, std::move(body));
    Value v = Eval(chain);
    PopFrame();
    return v;
  }

  void Unpack(const std::vector<std::string>& targets, const Value& v, int line) {
    if (targets.size() == 1) {
      Assign(targets[0], v);
      return;
    }
    if (!v.is_list() || v.list->size() != targets.size()) {
      Fail("chat template line ", line, ": cannot unpack ", TypeName(v), " into ", targets.size(),
           " names");
    }
    for (size_t i = 0; i < targets.size(); ++i) Assign(targets[i], (*v.list)[i]);
  }

  ValueList Iterate(const Value& v, int line) {
    ValueList items;
    if (!Guarded(line, [&] { return IterationItems(v, &items); })) {
      Fail("chat template line ", line, ": '", TypeName(v), "' object is not iterable");
    }
    return items;
  }

  void ExecFor(const Stmt& s) {
    ValueList items = Iterate(Eval(*s.exprs[0]), s.line);
    PushFrame();
    if (s.exprs.size() > 1) {  // `for x in xs if cond`: filtered before the loop counts
      ValueList kept;
      for (Value& item : items) {
        Step(s.line);
        Unpack(s.targets, item, s.line);
        if (Truthy(Eval(*s.exprs[1]))) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      Step(s.line);
      // Jinja2 runs each iteration in a fresh scope: a `set` in one is gone in the next.
      frames_.back().clear();
      Assign("loop", LoopVariable(items, i));
      Unpack(s.targets, items[static_cast<size_t>(i)], s.line);
      if (ExecBody(s.bodies[0]) == Flow::kBreak) break;
    }
    PopFrame();
    if (n == 0 && s.bodies.size() > 1) ExecBody(s.bodies[1]);
  }

  void ExecSet(const Stmt& s) {
    Value v = Eval(*s.exprs[0]);
    if (s.exprs.size() > 1) {  // set ns.attr = v
      Value target = Eval(*s.exprs[1]);
      if (!target.is_dict() || !target.dict->is_namespace) {
        Fail("chat template line ", s.line, ": cannot assign attribute '", s.name, "' on ",
             TypeName(target), " (only a namespace())");
      }
      target.dict->Set(s.name, std::move(v));
      return;
    }
    Unpack(s.targets, v, s.line);
  }

  Value MakeMacro(const Stmt& s) {
    return Value::Func([this, &s](CallArgs& args) { return CallMacro(s, args); });
  }

  Value CallMacro(const Stmt& s, CallArgs& args) {
    if (call_depth_ >= limits_.max_call_depth) {
      Fail("chat template line ", s.line, ": macro '", s.name, "' nested more than ",
           limits_.max_call_depth, " calls deep (recursion without end?)");
    }
    if (args.positional.size() > s.params.size()) {
      ValueFail("macro '", s.name, "' takes not more than ", s.params.size(), " argument(s)");
    }
    std::vector<size_t> saved_chain = chain_;
    chain_.assign(1, 0);
    PushFrame();
    ++call_depth_;
    struct Restore {
      Renderer& r;
      std::vector<size_t> chain;
      ~Restore() {
        --r.call_depth_;
        r.frames_.pop_back();
        r.chain_ = std::move(chain);
      }
    } restore{*this, std::move(saved_chain)};
    BindMacroArguments(s, args);
    return Value::String(Capture(s.bodies[0]));
  }

  // The macro's parameters from the call's arguments (by name, else by position, else the
  // default), `caller`, and the keyword arguments it does not name as `kwargs`.
  void BindMacroArguments(const Stmt& s, const CallArgs& args) {
    for (size_t p = 0; p < s.params.size(); ++p) {
      const MacroParam& param = s.params[p];
      const Value* given = nullptr;
      for (const auto& [k, v] : args.keywords) {
        if (k == param.name) given = &v;
      }
      if (given == nullptr && p < args.positional.size()) given = &args.positional[p];
      if (given != nullptr) {
        Assign(param.name, *given);
      } else if (param.default_value) {
        Assign(param.name, Eval(*param.default_value));
      } else {
        Assign(param.name, Value::Undefined(param.name));
      }
    }
    Value kwargs = Value::Dict();
    for (const auto& [k, v] : args.keywords) {
      if (k == "caller") {
        Assign("caller", v);
        continue;
      }
      bool is_param = false;
      for (const MacroParam& param : s.params) is_param = is_param || param.name == k;
      if (!is_param) kwargs.dict->Set(k, v);
    }
    Assign("varargs", Value::Tuple({}));
    Assign("kwargs", std::move(kwargs));
  }

  // --- expressions --------------------------------------------------------------------------
  // Runs fn, turning a ValueError from a filter, method or operator into grove::Error with the
  // line (TemplateRaised for raise_exception).
  template <typename Fn>
  auto Guarded(int line, Fn&& fn) -> decltype(fn()) {
    try {
      return fn();
    } catch (const ValueError& e) {
      std::string message = StrCat("chat template line ", line, ": ", e.what());
      if (e.raised) throw TemplateRaised(message);
      throw Error(message);
    }
  }

  // Prints a value; printing can fail too (a value nested too deep to print).
  void EmitValue(const Value& v, int line) {
    Emit(Guarded(line, [&] { return Value::String(ToStr(v)); }).text, line);
  }

  CallArgs EvalArgs(const Expr& e, size_t first = 1) {
    CallArgs args;
    args.line = e.line;
    for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(Eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs) args.keywords.emplace_back(k, Eval(*v));
    return args;
  }

  Value CallValue(const Value& fn, CallArgs& args) {
    if (fn.kind != Value::Kind::kFunction) {
      if (fn.is_undefined()) ValueFail("'", fn.text, "' is undefined");
      ValueFail("'", TypeName(fn), "' object is not callable");
    }
    return (*fn.function)(args);
  }

  Value Eval(const Expr& e) {
    Step(e.line);
    return Guarded(e.line, [&] {
      Value v = EvalUnguarded(e);
      ChargeResult(e, v);
      return v;
    });
  }

  Value EvalUnguarded(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.value;
      case Expr::Kind::kName:
        return Lookup(e.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple:
        return EvalSequence(e);
      case Expr::Kind::kDict:
        return EvalDict(e);
      case Expr::Kind::kAttr:
        return GetAttr(Eval(*e.args[0]), e.name);
      case Expr::Kind::kItem:
        return GetItem(Eval(*e.args[0]), Eval(*e.args[1]));
      case Expr::Kind::kSlice: {
        auto part = [&](size_t i) { return e.args[i] ? Eval(*e.args[i]) : Value::None(); };
        return Slice(Eval(*e.args[0]), part(1), part(2), part(3));
      }
      case Expr::Kind::kCall:
        return EvalCall(e);
      case Expr::Kind::kFilter: {
        Value target = Eval(*e.args[0]);
        CallArgs args = EvalArgs(e);
        return ApplyFilter(e.name, target, args, limits_.max_output_bytes);
      }
      case Expr::Kind::kTest: {
        Value target = Eval(*e.args[0]);
        CallArgs args = EvalArgs(e);
        bool result = ApplyTest(e.name, target, args);
        return Value::Bool(result != e.negated);
      }
      case Expr::Kind::kUnary:
        return UnaryOperation(e.name, Eval(*e.args[0]));
      case Expr::Kind::kAnd: {
        Value left = Eval(*e.args[0]);
        return Truthy(left) ? Eval(*e.args[1]) : left;
      }
      case Expr::Kind::kOr: {
        Value left = Eval(*e.args[0]);
        return Truthy(left) ? left : Eval(*e.args[1]);
      }
      case Expr::Kind::kCondition:
        if (Truthy(Eval(*e.args[1]))) return Eval(*e.args[0]);
        return e.args[2] ? Eval(*e.args[2]) : Value::Undefined("else");
      case Expr::Kind::kBinary:
        return BinaryOperation(e.name, Eval(*e.args[0]), Eval(*e.args[1]),
                               limits_.max_output_bytes);
    }
    return Value::Undefined();
  }

  // `[a, b]` and `(a, b)`.
  Value EvalSequence(const Expr& e) {
    ValueList items;
    for (const ExprPtr& a : e.args) items.push_back(Eval(*a));
    return e.kind == Expr::Kind::kTuple ? Value::Tuple(std::move(items))
                                        : Value::List(std::move(items));
  }

  // `{k: v, ...}`: keys and values in the order written.
  Value EvalDict(const Expr& e) {
    Value d = Value::Dict();
    for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
      Value key = Eval(*e.args[i]);
      d.dict->Set(ValueDict::EncodeKey(key), Eval(*e.args[i + 1]));
    }
    return d;
  }

  Value EvalCall(const Expr& e) {
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::Kind::kAttr) {
      Value target = Eval(*callee.args[0]);
      CallArgs args = EvalArgs(e);
      if (target.is_dict()) {
        const Value* member = target.dict->Find(callee.name);
        if (member != nullptr && member->kind == Value::Kind::kFunction) {
          return CallValue(*member, args);
        }
      }
      if (target.is_undefined()) {
        ValueFail("'", target.text, "' is undefined (calling ", callee.name, "())");
      }
      return CallMethod(target, callee.name, args);
    }
    Value fn = Eval(callee);
    CallArgs args = EvalArgs(e);
    if (fn.is_undefined() && callee.kind == Expr::Kind::kName) {
      ValueFail("unsupported function '", callee.name, "'");
    }
    return CallValue(fn, args);
  }

  RenderLimits limits_;
  RenderBudget budget_;
  uintptr_t stack_base_ = 0;
  std::vector<std::weak_ptr<ValueDict>> namespaces_;  // every namespace() made (see ~Renderer)
  std::vector<Frame> frames_;
  std::vector<size_t> chain_;
  std::string* out_ = nullptr;
  int64_t steps_ = 0;
  int64_t next_check_ = 0;  // the step at which CheckLimits runs next
  int64_t checks_ = 0;      // CheckLimits' runs
  int call_depth_ = 0;
};

}  // namespace

Template::Template(std::string_view source, const LexOptions& options)
    : body_(std::make_shared<const Body>(Parse(source, options))) {}

std::string Template::Render(const ValueDict& globals, const RenderLimits& limits) const {
  return Renderer(globals, limits).Run(*body_);
}

}  // namespace grove::jinja
