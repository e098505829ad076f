#include "train/corpus_lexicon.h"

#include <cctype>
#include <set>
#include <string_view>

#include "tasks/corpus_rng.h"

namespace grove {
namespace {

// Fixed: the lexicon does not depend on the corpus seed (see corpus_lexicon.h).
constexpr uint64_t kLexiconSeed = 0x6C6578696B6F6E31ull;

// Procedural word counts. With the core lists and inflections this gives about 6,500 word forms:
// "several thousand distinct words", of which a 1M-word corpus uses nearly all (see
// docs/corpus.md).
constexpr int kFemaleNames = 350;
constexpr int kMaleNames = 350;
constexpr int kProceduralThings = 1100;
constexpr int kProceduralAnimals = 150;
constexpr int kProceduralVerbs = 500;
constexpr int kProceduralAdjectives = 400;
constexpr int kTowns = 250;

const std::vector<std::string_view> kOnsets = {
    "b", "d",  "f",  "g",  "h",  "k",  "l",  "m",  "n",  "p",  "r",  "s",  "t",  "v",  "w",
    "z", "br", "dr", "gr", "kl", "pl", "st", "tr", "sh", "ch", "th", "fl", "sn", "cr", "bl"};
const std::vector<std::string_view> kVowels = {"a", "e",  "i",  "o",  "u",  "a",
                                               "o", "ai", "ea", "oo", "ou", "ie"};
const std::vector<std::string_view> kCodas = {"",  "",  "",   "n",  "r",  "l",  "m",  "s",
                                              "t", "k", "nd", "st", "rn", "mp", "sk", "lt"};
const std::vector<std::string_view> kNameEndsFemale = {"a",   "i",   "e",   "ia",
                                                       "ela", "ina", "ara", "ette"};
const std::vector<std::string_view> kNameEndsMale = {"n",  "r",  "k",  "m",  "d", "s",
                                                     "an", "or", "ek", "us", "im"};
const std::vector<std::string_view> kTownEnds = {"ford", "ton", "holm", "wick",  "dale",
                                                 "moor", "by",  "mere", "stead", "vale"};
const std::vector<std::string_view> kAdjectiveEnds = {"y", "ish", "ful", "en", "ic", "ous", "ly"};

bool IsVowel(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }

std::string Syllables(CorpusRng& rng, int n) {
  std::string w;
  for (int i = 0; i < n; ++i) {
    w += rng.Pick(kOnsets);
    w += rng.Pick(kVowels);
    if (i + 1 == n || rng.Chance(0.3)) w += rng.Pick(kCodas);
  }
  return w;
}

std::string Capitalized(std::string w) {
  w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
  return w;
}

std::string Plural(const std::string& w) {
  const char last = w.back();
  if (last == 's' || last == 'x' || last == 'z' || w.ends_with("sh") || w.ends_with("ch"))
    return w + "es";
  if (last == 'y' && w.size() > 1 && !IsVowel(w[w.size() - 2]))
    return w.substr(0, w.size() - 1) + "ies";
  return w + "s";
}

// Regular inflection of a procedural verb; stems end in a consonant (no e-dropping or doubling
// rules needed, which keeps the endings uniform for the model to learn).
LexiconVerb RegularVerb(const std::string& base) {
  const bool sibilant = base.ends_with("s") || base.ends_with("sh") || base.ends_with("ch");
  return {base, sibilant ? base + "es" : base + "s", base + "ed", base + "ing"};
}

// Draws words from `make` until `count` new ones (not in `used`) have been made.
template <typename Make>
std::vector<std::string> Fresh(CorpusRng& rng, std::set<std::string>* used, int count, Make make) {
  std::vector<std::string> out;
  while (static_cast<int>(out.size()) < count) {
    std::string w = make(rng);
    if (w.size() < 3 || w.size() > 11) continue;
    // Compared in lower case: a name spelled "Then" would pass for the word at a sentence start.
    std::string key = w;
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (used->insert(key).second) out.push_back(std::move(w));
  }
  return out;
}

// Nouns a template names by hand, each with its plural, reserved in `used`.
void CoreNouns(std::set<std::string>& used, std::vector<LexiconNoun>* out,
               std::initializer_list<std::string_view> words) {
  for (std::string_view w : words) {
    used.insert(std::string(w));
    out->push_back({std::string(w), Plural(std::string(w))});
  }
}

// The hand-written roles, things, animals and locations.
void AddCoreNouns(Lexicon& lex, std::set<std::string>& used) {
  CoreNouns(used, &lex.roles, {"baker",  "farmer", "fisher",   "painter", "teacher",  "sailor",
                               "hunter", "weaver", "singer",   "builder", "doctor",   "miller",
                               "potter", "knight", "tailor",   "ranger",  "guard",    "merchant",
                               "scribe", "cook",   "gardener", "smith",   "shepherd", "traveler"});
  CoreNouns(
      used, &lex.things,
      {"ball",   "book",   "hat",    "box",    "key",     "cup",   "kite",   "boat",   "lamp",
       "coat",   "shoe",   "bag",    "map",    "ring",    "stone", "stick",  "basket", "blanket",
       "bell",   "drum",   "flute",  "letter", "rope",    "cart",  "chair",  "door",   "window",
       "apple",  "flower", "tree",   "shell",  "feather", "coin",  "candle", "toy",    "picture",
       "spoon",  "bowl",   "bucket", "ladder", "wheel",   "clock", "mirror", "scarf",  "sock",
       "bottle", "jar",    "pen",    "brush",  "seed"});
  CoreNouns(used, &lex.animals,
            {"cat", "dog", "bird", "fox", "horse", "rabbit", "mouse", "duck", "goat", "frog", "owl",
             "bear", "sheep", "cow", "pig", "wolf", "fish", "hen"});
  for (std::string_view w : {"garden", "market", "forest", "river",  "hill",  "kitchen", "school",
                             "house",  "field",  "lake",   "bridge", "barn",  "village", "park",
                             "beach",  "cave",   "meadow", "shop",   "tower", "well"}) {
    lex.locations.emplace_back(w);
  }
}

// The hand-written transitive verbs (irregular ones among them), in every form.
void AddCoreVerbs(Lexicon& lex, std::set<std::string>& used) {
  const struct {
    const char* base;
    const char* past;
  } irregular[] = {
      {"find", "found"},    {"take", "took"},    {"give", "gave"},     {"make", "made"},
      {"see", "saw"},       {"hold", "held"},    {"bring", "brought"}, {"build", "built"},
      {"throw", "threw"},   {"draw", "drew"},    {"hide", "hid"},      {"keep", "kept"},
      {"sell", "sold"},     {"buy", "bought"},   {"break", "broke"},   {"lose", "lost"},
      {"eat", "ate"},       {"catch", "caught"}, {"carry", "carried"}, {"wash", "washed"},
      {"paint", "painted"}, {"open", "opened"},  {"clean", "cleaned"}, {"fix", "fixed"},
      {"pull", "pulled"},   {"push", "pushed"},  {"watch", "watched"}, {"share", "shared"},
      {"like", "liked"},    {"love", "loved"},   {"move", "moved"},    {"help", "helped"}};
  for (const auto& v : irregular) {
    std::string base = v.base;
    used.insert(base);
    std::string third = base.ends_with("sh") || base.ends_with("ch") || base.ends_with("x")
                            ? base + "es"
                        : base == "carry" ? "carries"
                                          : base + "s";
    std::string ing = base.ends_with("e") && base != "see" ? base.substr(0, base.size() - 1) + "ing"
                                                           : base + "ing";
    lex.verbs.push_back({base, third, v.past, ing});
  }
}

// The hand-written adjectives, feelings, weathers and foods.
void AddCoreDescriptions(Lexicon& lex, std::set<std::string>& used) {
  for (std::string_view w :
       {"big",    "small",  "old",   "new",  "red",   "blue",    "green", "yellow",
        "little", "tall",   "round", "soft", "shiny", "heavy",   "quiet", "loud",
        "bright", "dark",   "warm",  "cold", "funny", "strange", "kind",  "brave",
        "clever", "gentle", "busy",  "lazy", "wise",  "curious"}) {
    used.insert(std::string(w));
    lex.adjectives.emplace_back(w);
  }
  for (std::string_view w : {"happy", "sad", "angry", "afraid", "proud", "tired", "surprised",
                             "worried", "excited", "hungry", "lonely", "glad"}) {
    used.insert(std::string(w));
    lex.feelings.emplace_back(w);
  }
  for (std::string_view w : {"sunny", "rainy", "windy", "snowy", "cloudy", "foggy"}) {
    used.insert(std::string(w));
    lex.weathers.emplace_back(w);
  }
  for (std::string_view w :
       {"bread", "soup", "cake", "cheese", "honey", "pie", "rice", "milk", "tea", "jam"}) {
    used.insert(std::string(w));
    lex.foods.emplace_back(w);
  }
}

void ReserveFunctionWords(std::set<std::string>& used) {
  // Function words the templates use, reserved so no procedural word collides with them.
  for (std::string_view w :
       {"the",   "and",      "but",   "because", "then",   "was",     "were",     "had",
        "has",   "his",      "her",   "him",     "she",    "they",    "them",     "their",
        "with",  "from",     "into",  "near",    "under",  "over",    "very",     "said",
        "asked", "one",      "day",   "time",    "upon",   "that",    "there",    "lived",
        "named", "called",   "who",   "not",     "could",  "would",   "will",     "yes",
        "first", "look",     "each",  "after",   "how",    "many",    "much",     "left",
        "input", "possible", "value", "sure",    "likely", "problem", "solution", "answer",
        "poor",  "where",    "what",  "this",    "is",     "it",      "are",      "you",
        "do",    "did",      "we",    "me",      "my",     "in",      "on",       "at",
        "for",   "of",       "to",    "so",      "a",      "an",      "as",       "be",
        "by",    "no"}) {
    used.insert(std::string(w));
  }
}

// Names, towns and more things, animals, verbs and adjectives, made of syllables by a fixed seed,
// none of them a word reserved before.
void AddProceduralWords(Lexicon& lex, std::set<std::string>& used) {
  CorpusRng rng(kLexiconSeed, 0);
  lex.female_names = Fresh(rng, &used, kFemaleNames, [](CorpusRng& r) {
    return Capitalized(Syllables(r, r.Range(1, 2)) + std::string(r.Pick(kNameEndsFemale)));
  });
  lex.male_names = Fresh(rng, &used, kMaleNames, [](CorpusRng& r) {
    std::string w = Syllables(r, r.Range(1, 2));
    if (IsVowel(w.back())) w += r.Pick(kNameEndsMale);
    return Capitalized(w);
  });
  for (std::string& w : Fresh(rng, &used, kProceduralThings,
                              [](CorpusRng& r) { return Syllables(r, r.Range(1, 3)); })) {
    lex.things.push_back({w, Plural(w)});
  }
  for (std::string& w :
       Fresh(rng, &used, kProceduralAnimals, [](CorpusRng& r) { return Syllables(r, 2); })) {
    lex.animals.push_back({w, Plural(w)});
  }
  for (std::string& w : Fresh(rng, &used, kProceduralVerbs, [](CorpusRng& r) {
         std::string w = Syllables(r, r.Range(1, 2));
         if (IsVowel(w.back())) w += "t";
         return w;
       })) {
    lex.verbs.push_back(RegularVerb(w));
  }
  auto adjectives = Fresh(rng, &used, kProceduralAdjectives, [](CorpusRng& r) {
    return Syllables(r, r.Range(1, 2)) + std::string(r.Pick(kAdjectiveEnds));
  });
  lex.adjectives.insert(lex.adjectives.end(), adjectives.begin(), adjectives.end());
  lex.towns = Fresh(rng, &used, kTowns, [](CorpusRng& r) {
    return Capitalized(Syllables(r, r.Range(1, 2)) + std::string(r.Pick(kTownEnds)));
  });
}

Lexicon BuildLexicon() {
  Lexicon lex;
  std::set<std::string> used;
  AddCoreNouns(lex, used);
  AddCoreVerbs(lex, used);
  AddCoreDescriptions(lex, used);
  ReserveFunctionWords(used);
  AddProceduralWords(lex, used);
  return lex;
}

}  // namespace

std::vector<std::string> Lexicon::AllForms() const {
  std::set<std::string> forms;
  for (const auto* list : {&female_names, &male_names, &locations, &towns, &adjectives, &feelings,
                           &weathers, &foods}) {
    forms.insert(list->begin(), list->end());
  }
  for (const auto* list : {&roles, &things, &animals}) {
    for (const LexiconNoun& n : *list) forms.insert({n.one, n.many});
  }
  for (const LexiconVerb& v : verbs) forms.insert({v.base, v.third, v.past, v.ing});
  return {forms.begin(), forms.end()};
}

const Lexicon& StoryLexicon() {
  static const Lexicon lexicon = BuildLexicon();
  return lexicon;
}

}  // namespace grove
