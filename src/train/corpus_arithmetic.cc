#include "train/corpus_arithmetic.h"

#include "base/error.h"
#include "train/corpus_lexicon.h"

namespace grove {
namespace {

struct Person {
  std::string name;
  std::string he;  // "she"
  std::string He;  // "She"
};

Person PickPerson(CorpusRng& rng, const Lexicon& lex) {
  const bool female = rng.Chance(0.5);
  return {rng.PickSkewed(female ? lex.female_names : lex.male_names), female ? "she" : "he",
          female ? "She" : "He"};
}

// "x op y = z" (the form the tests and, later, a model parse).
std::string Eq(long x, char op, long y, long z) { return StrCat(x, " ", op, " ", y, " = ", z); }

std::string BuyAndGive(CorpusRng& rng, const Lexicon& lex) {
  const Person p = PickPerson(rng, lex);
  Person q;
  do q = PickPerson(rng, lex);
  while (q.name == p.name);
  const std::string& items = rng.PickSkewed(lex.things).many;
  const long a = rng.Range(5, 60), b = rng.Range(2, 40), c = rng.Range(1, static_cast<int>(a + b));
  return StrCat("Problem: ", p.name, " has ", a, " ", items, ". ", p.He, " buys ", b, " more ",
                items, " and then gives ", c, " ", items, " to ", q.name, ". How many ", items,
                " does ", p.name, " have now?\nSolution:\n", p.name, " starts with ", a, " ", items,
                ".\nAfter buying ", b, " more, ", p.he, " has ", Eq(a, '+', b, a + b), " ", items,
                ".\nAfter giving ", c, " away, ", p.he, " has ", Eq(a + b, '-', c, a + b - c), " ",
                items, ".\nAnswer: ", a + b - c, "\n");
}

std::string Groups(CorpusRng& rng, const Lexicon& lex) {
  const Person p = PickPerson(rng, lex);
  const std::string& boxes = rng.Pick(lex.things).many;
  const std::string& items = rng.PickSkewed(lex.things).many;
  const long a = rng.Range(2, 12), b = rng.Range(2, 15), c = rng.Range(1, 30);
  return StrCat("Problem: ", p.name, " has ", a, " ", boxes, ". Each one holds ", b, " ", items,
                ". ", p.He, " also has ", c, " loose ", items, ". How many ", items, " does ",
                p.name, " have in all?\nSolution:\n", "The ", boxes, " hold ", Eq(a, '*', b, a * b),
                " ", items, ".\nWith the loose ones, ", p.he, " has ", Eq(a * b, '+', c, a * b + c),
                " ", items, ".\nAnswer: ", a * b + c, "\n");
}

std::string Share(CorpusRng& rng, const Lexicon& lex) {
  const Person p = PickPerson(rng, lex);
  const std::string& items = rng.PickSkewed(lex.things).many;
  const long each = rng.Range(2, 12), friends = rng.Range(2, 9), kept = rng.Range(1, 20);
  const long total = each * friends + kept;
  return StrCat("Problem: ", p.name, " has ", total, " ", items, ". ", p.He, " keeps ", kept,
                " and shares the rest equally among ", friends, " friends. How many ", items,
                " does each friend get?\nSolution:\n", "After keeping ", kept, ", ", p.he,
                " shares ", Eq(total, '-', kept, total - kept), " ", items, ".\nEach friend gets ",
                Eq(total - kept, '/', friends, each), " ", items, ".\nAnswer: ", each, "\n");
}

std::string Change(CorpusRng& rng, const Lexicon& lex) {
  const Person p = PickPerson(rng, lex);
  const std::string& items = rng.PickSkewed(lex.things).many;
  const long n = rng.Range(2, 9), price = rng.Range(2, 15);
  const long cost = n * price;
  const long paid = (cost / 10 + 1 + rng.Range(0, 5)) * 10;
  return StrCat("Problem: ", p.name, " buys ", n, " ", items, " at the market. Each costs ", price,
                " coins. ", p.He, " pays with ", paid, " coins. How much change does ", p.he,
                " get?\nSolution:\n", "The ", items, " cost ", Eq(n, '*', price, cost),
                " coins.\nThe change is ", Eq(paid, '-', cost, paid - cost),
                " coins.\nAnswer: ", paid - cost, "\n");
}

std::string Pages(CorpusRng& rng, const Lexicon& lex) {
  const Person p = PickPerson(rng, lex);
  const long per_day = rng.Range(3, 25), days = rng.Range(2, 9);
  const long done = per_day * days;
  const long total = done + rng.Range(0, 120);
  return StrCat("Problem: A book has ", total, " pages. ", p.name, " reads ", per_day,
                " pages each day for ", days,
                " days. How many pages are left to read?\nSolution:\n", p.name, " reads ",
                Eq(per_day, '*', days, done), " pages.\nThe pages left are ",
                Eq(total, '-', done, total - done), ".\nAnswer: ", total - done, "\n");
}

}  // namespace

std::string GenerateArithmeticProblem(CorpusRng& rng) {
  const Lexicon& lex = StoryLexicon();
  switch (rng.Below(5)) {
    case 0:
      return BuyAndGive(rng, lex);
    case 1:
      return Groups(rng, lex);
    case 2:
      return Share(rng, lex);
    case 3:
      return Change(rng, lex);
    default:
      return Pages(rng, lex);
  }
}

}  // namespace grove
