#include "train/corpus_story.h"

#include <string_view>
#include <vector>

#include "base/error.h"
#include "train/corpus_lexicon.h"

namespace grove {
namespace {

struct Character {
  std::string name;
  bool female = false;
  std::string role;
  std::string trait;
};

// A template is text with slots in braces: {A} a character's name, {A.he} / {A.He} / {A.him} /
// {A.his} / {A.His} its pronouns, {A.role} / {A.trait}; story-level slots that keep their value for
// the whole story ({obj}, {gift}, {pet}, {town}, {loc1}..{loc3}, {mat}, {num}); and fresh slots
// drawn anew at each use ({thing}, {things}, {animal}, {adj}, {verb} (past tense), {verb.base},
// {verb.third}, {verb.ing}, {food}, {weather}, {good}, {bad}). {a:X} puts "a" or "an" before the
// value of X.
using Template = std::string_view;

// Plot skeletons: each step is a list of alternatives, one of which is used (an empty alternative
// skips the step).
using Step = std::vector<Template>;
using Plot = std::vector<Step>;

const std::vector<Template> kIntros = {
    "Once upon a time, in {town}, there lived {a:A.trait} {A.role} named {A}.",
    "{A} was {a:A.trait} {A.role} who lived in {town}.",
    "There was once {a:A.trait} {A.role} called {A}. {A.He} lived near the {loc1} in {town}.",
    "In the town of {town}, there was {a:A.trait} {A.role}. {A.His} name was {A}.",
};
const std::vector<Template> kFriends = {
    "{A.His} best friend was {B}, {a:B.trait} {B.role}.",
    "{A} had a friend named {B}. {B.He} was {a:B.trait} {B.role}.",
    "Every day, {A} played with {B}, {a:B.trait} {B.role} who lived next door.",
};
// Filler: actions with fresh slots, where the lexicon's breadth shows.
const std::vector<Template> kFillers = {
    "{A} {verb} {a:adj} {thing}.",
    "{B} {verb} the {things} near the {loc1}.",
    "Then {A.he} {verb} {a:thing} and {a:adj} {thing}.",
    "{A} liked {things} and {things}, but {A.he} did not like {things}.",
    "{a:animal} was sitting on the {thing}.",
    "The {loc2} was full of {adj} {things}.",
    "Because it was {weather}, {A} and {B} stayed inside and ate some {food}.",
    "{B} was {bad}, so {A} gave {B.him} some {food}.",
    "\"Look at that {adj} {animal}!\" said {B}.",
    "\"I like your {adj} {thing},\" said {A} to {B}.",
    "{A} liked {verb.ing} {things} more than anything.",
    "\"Can you {verb.base} the {thing} for me?\" asked {B}. \"Of course,\" said {A}.",
    "Every morning, {B} {verb.third} the {things} before {B.he} {verb.third} the {thing}.",
    "{B} was busy {verb.ing} {a:adj} {thing}, so {A} waited near the {loc1}.",
};

const std::vector<Plot> kPlots = {
    // The lost object.
    {{"{A.He} had {a:adj} {obj} that {A.he} loved very much.",
      "{A} always carried {A.his} {obj} with {A.him}."},
     {"One day, {A} could not find {A.his} {obj}.",
      "One {weather} morning, {A} lost {A.his} {obj} near the {loc1}.",
      "One day, {a:pet} took {A.his} {obj} and ran to the {loc1}."},
     {"{A} was {bad} because {A.he} could not find the {obj}.",
      "\"Where is my {obj}?\" {A} asked."},
     {"\"Have you seen my {obj}, {B}?\" asked {A}.", "{A} went to {B} and asked for help."},
     {"\"I will help you,\" said {B}. \"Let us look in the {loc2}.\"",
      "\"Do not be {bad},\" said {B}. \"We will find it.\""},
     {"So {A} and {B} went to the {loc2}.", "{A} and {B} walked to the {loc2} together."},
     {"They looked under the {thing} and behind the {thing}, but the {obj} was not there.",
      "{B} found {a:adj} {thing}, but it was not the {obj}.", ""},
     {"On the way, they met {C}, {a:C.trait} {C.role}. \"Did you see {A.his} {obj}?\" asked {B}. "
      "\"Yes,\" said {C}. \"I saw it near the {loc3}.\"",
      ""},
     {"At last, {B} found the {obj} under {a:adj} {thing} in the {loc3}.",
      "At last, {A} found {A.his} {obj} in the {loc3}."},
     {"{A} was so {good} that {A.he} hugged {B}. \"Thank you, {B}!\" said {A}.",
      "\"Thank you, {B}!\" said {A}. \"You are a good friend.\""},
     {"From that day on, {A} never lost {A.his} {obj} again.",
      "Then they went home and ate some {food}.",
      "From that day on, {A} and {B} were best friends."}},
    // The gift.
    {{"One day, {A} wanted to make {a:gift} for {B}.",
      "{B} was {bad}, so {A} decided to make {B.him} {a:gift}."},
     {"{A.He} needed {num} {mat} and some {food}.", "To make {a:gift}, {A.he} needed {num} {mat}."},
     {"First, {A} went to the {loc1} and bought {num} {mat}.",
      "First, {A} found {num} {mat} in the {loc1}."},
     {"\"Why do you need {num} {mat}?\" asked {B}. \"You will see,\" said {A}.", ""},
     {"Then {A.he} {verb} the {mat} and made them into {a:adj} {gift}.",
      "Then {A.he} worked all day on the {gift}."},
     {"\"What are you making?\" asked {C}. \"It is a surprise for {B},\" said {A}.", ""},
     {"When the {gift} was ready, {A} took it to {B}.",
      "In the evening, {A} gave the {gift} to {B}."},
     {"{B} was very {good}. \"Thank you, {A}!\" {B.he} said. \"It is the best {gift} in {town}!\"",
      "\"Is this for me?\" asked {B}. \"Yes,\" said {A}. {B} was so {good} that {B.he} smiled all "
      "day."},
     {"From that day on, {B} kept the {gift} near {B.his} bed.",
      "Then {A} and {B} ate some {food} together."}},
    // The lost animal.
    {{"One {weather} day, {A} saw {a:adj} {pet} near the {loc1}.",
      "One day, {A} and {B} found {a:pet} in the {loc1}."},
     {"The {pet} was {bad} because it could not find its home.",
      "The {pet} was lost, so it was very {bad}."},
     {"\"Poor {pet},\" said {A}. \"We must help it.\"",
      "\"Where do you live, little {pet}?\" asked {B}."},
     {"{A} gave the {pet} some {food}, and it was not hungry any more.", ""},
     {"So {A} and {B} carried the {pet} to the {loc2}.",
      "They walked with the {pet} to the {loc2}, but its home was not there."},
     {"There they met {C}, {a:C.trait} {C.role}. \"That is my {pet}!\" said {C}.",
      "At the {loc3}, they met {C}, who was looking for {C.his} {pet}."},
     {"{C} was so {good} that {C.he} gave {A} and {B} {a:thing}.",
      "\"Thank you!\" said {C}. \"I looked for it all day.\""},
     {"Then {A} and {B} went home, {good} and tired.",
      "From that day on, {A}, {B} and {C} were friends."}},
};

const std::vector<std::string_view> kGoodFeelings = {"happy", "glad", "proud", "excited",
                                                     "surprised"};
const std::vector<std::string_view> kBadFeelings = {"sad",    "worried", "afraid",
                                                    "lonely", "tired",   "angry"};
const std::vector<std::string_view> kNumbers = {"two",   "three", "four", "five", "six",
                                                "seven", "eight", "nine", "ten"};

class StoryWriter {
 public:
  explicit StoryWriter(CorpusRng& rng) : rng_(rng), lex_(StoryLexicon()) {
    for (int i = 0; i < 3; ++i) {
      Character& c = cast_[i];
      do {
        c.female = rng_.Chance(0.5);
        c.name = rng_.PickSkewed(c.female ? lex_.female_names : lex_.male_names);
      } while ((i > 0 && c.name == cast_[0].name) || (i > 1 && c.name == cast_[1].name));
      c.role = rng_.PickSkewed(lex_.roles).one;
      c.trait = rng_.Pick(lex_.adjectives);
    }
    obj_ = rng_.PickSkewed(lex_.things).one;
    gift_ = rng_.PickSkewed(lex_.things).one;
    mat_ = rng_.PickSkewed(lex_.things).many;
    pet_ = rng_.PickSkewed(lex_.animals).one;
    num_ = rng_.Pick(kNumbers);
    town_ = rng_.PickSkewed(lex_.towns);
    std::vector<std::string> locs = lex_.locations;
    rng_.Shuffle(&locs);
    locs_ = {locs[0], locs[1], locs[2]};
  }

  std::string Write() {
    Sentence(rng_.Pick(kIntros));
    Sentence(rng_.Pick(kFriends));
    out_ += '\n';
    const Plot& plot = rng_.Pick(kPlots);
    for (std::size_t i = 0; i < plot.size(); ++i) {
      Sentence(rng_.Pick(plot[i]));
      if (rng_.Chance(0.25)) Sentence(rng_.Pick(kFillers));
      // Paragraph breaks after the set-up and before the ending.
      if (i == 1 || i + 2 == plot.size()) out_ += '\n';
    }
    if (out_.back() == ' ') out_.pop_back();
    out_ += '\n';
    return std::move(out_);
  }

 private:
  void Sentence(Template t) {
    if (t.empty()) return;
    if (!out_.empty() && out_.back() != '\n') out_ += ' ';
    const std::size_t start = out_.size();
    Expand(t);
    // Templates may start with a slot whose value is lower case ({a:pet}).
    if (out_[start] >= 'a' && out_[start] <= 'z')
      out_[start] = static_cast<char>(out_[start] - 'a' + 'A');
  }

  void Expand(Template t) {
    for (std::size_t i = 0; i < t.size();) {
      if (t[i] != '{') {
        out_ += t[i++];
        continue;
      }
      const std::size_t close = t.find('}', i);
      GROVE_CHECK(close != Template::npos, "unclosed slot in story template");
      std::string_view key = t.substr(i + 1, close - i - 1);
      i = close + 1;
      if (key.starts_with("a:")) {
        const std::string value = Slot(key.substr(2));
        const bool vowel = std::string_view("aeiouAEIOU").find(value[0]) != std::string_view::npos;
        out_ += vowel ? "an " : "a ";
        out_ += value;
      } else {
        out_ += Slot(key);
      }
    }
  }

  std::string Slot(std::string_view key) {
    if (key.size() >= 1 && (key[0] == 'A' || key[0] == 'B' || key[0] == 'C') &&
        (key.size() == 1 || key[1] == '.')) {
      const Character& c = cast_[key[0] - 'A'];
      const std::string_view field = key.size() == 1 ? "" : key.substr(2);
      if (field.empty()) return c.name;
      if (field == "he") return c.female ? "she" : "he";
      if (field == "He") return c.female ? "She" : "He";
      if (field == "him") return c.female ? "her" : "him";
      if (field == "his") return c.female ? "her" : "his";
      if (field == "His") return c.female ? "Her" : "His";
      if (field == "role") return c.role;
      if (field == "trait") return c.trait;
    }
    if (key == "obj") return obj_;
    if (key == "gift") return gift_;
    if (key == "mat") return mat_;
    if (key == "pet") return pet_;
    if (key == "town") return town_;
    if (key == "loc1") return locs_[0];
    if (key == "loc2") return locs_[1];
    if (key == "loc3") return locs_[2];
    if (key == "thing") return rng_.PickSkewed(lex_.things).one;
    if (key == "things") return rng_.PickSkewed(lex_.things).many;
    if (key == "animal") return rng_.PickSkewed(lex_.animals).one;
    if (key == "adj") return rng_.PickSkewed(lex_.adjectives);
    if (key == "verb") return rng_.PickSkewed(lex_.verbs).past;
    if (key == "verb.base") return rng_.PickSkewed(lex_.verbs).base;
    if (key == "verb.third") return rng_.PickSkewed(lex_.verbs).third;
    if (key == "verb.ing") return rng_.PickSkewed(lex_.verbs).ing;
    if (key == "food") return rng_.Pick(lex_.foods);
    if (key == "weather") return rng_.Pick(lex_.weathers);
    if (key == "num") return num_;
    if (key == "good") return std::string(rng_.Pick(kGoodFeelings));
    if (key == "bad") return std::string(rng_.Pick(kBadFeelings));
    Fail("internal: unknown story template slot '{", key, "}'");
  }

  CorpusRng& rng_;
  const Lexicon& lex_;
  Character cast_[3];
  std::string obj_, gift_, mat_, pet_, town_, num_;
  std::vector<std::string> locs_;
  std::string out_;
};

}  // namespace

std::string GenerateStory(CorpusRng& rng) { return StoryWriter(rng).Write(); }

}  // namespace grove
