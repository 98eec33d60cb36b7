"""English utterances for the lifetime memory (``make_lifetime.py --texts english``): everyday topics in short
templated sentences, so a million posts embedded by the real model sit where conversation sits in its space.

The made-up words of the default texts put a real model's vectors of them far from any English question, so the
distractors never compete with real turns in the vector leg. These compete: a question about a trip meets
thousands of posts about trips. The topics are generic (home, work, travel, food, health, hobbies ...), written
for this generator and not drawn from any dataset, so no benchmark question has its answer here.
"""

from __future__ import annotations

import random

TOPICS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    # topic: (nouns, verbs as "base/past", adjectives)
    "cooking": (("soup", "pasta", "bread", "curry", "salad", "oven", "recipe", "spices"), ("cook/cooked", "bake/baked", "try/tried", "burn/burned"), ("spicy", "fresh", "homemade", "salty")),
    "gardening": (("tomatoes", "roses", "soil", "seeds", "hedge", "compost", "shed", "lawn"), ("plant/planted", "water/watered", "prune/pruned", "dig/dug"), ("green", "muddy", "overgrown", "sunny")),
    "running": (("marathon", "trail", "shoes", "pace", "race", "knee", "stretches", "track"), ("run/ran", "train/trained", "finish/finished", "sign up for/signed up for"), ("long", "slow", "hilly", "sore")),
    "work": (("deadline", "meeting", "manager", "report", "project", "client", "office", "promotion"), ("prepare/prepared", "present/presented", "miss/missed", "finish/finished"), ("stressful", "busy", "late", "quarterly")),
    "moving": (("apartment", "boxes", "lease", "landlord", "movers", "neighbourhood", "rent", "furniture"), ("pack/packed", "move/moved", "sign/signed", "rent/rented"), ("new", "tiny", "expensive", "quiet")),
    "pets": (("puppy", "vet", "leash", "kitten", "collar", "treats", "walk", "litter"), ("adopt/adopted", "feed/fed", "walk/walked", "groom/groomed"), ("playful", "sleepy", "shy", "hungry")),
    "travel": (("flight", "hotel", "passport", "luggage", "itinerary", "beach", "museum", "train"), ("book/booked", "visit/visited", "pack/packed", "miss/missed"), ("cheap", "delayed", "crowded", "beautiful")),
    "music": (("guitar", "concert", "album", "band", "chords", "piano", "playlist", "lyrics"), ("play/played", "practise/practised", "record/recorded", "listen to/listened to"), ("loud", "acoustic", "catchy", "live")),
    "reading": (("novel", "chapter", "library", "author", "series", "book club", "poem", "biography"), ("read/read", "finish/finished", "borrow/borrowed", "recommend/recommended"), ("long", "gripping", "slow", "classic")),
    "fitness": (("gym", "weights", "trainer", "yoga", "squats", "class", "routine", "protein"), ("lift/lifted", "join/joined", "skip/skipped", "stretch/stretched"), ("tired", "strong", "early", "intense")),
    "health": (("doctor", "appointment", "headache", "prescription", "allergy", "sleep", "cold", "dentist"), ("see/saw", "take/took", "book/booked", "feel/felt"), ("sick", "better", "sore", "dizzy")),
    "family": (("sister", "brother", "parents", "grandmother", "cousin", "aunt", "kids", "birthday"), ("call/called", "visit/visited", "help/helped", "invite/invited"), ("old", "little", "busy", "proud")),
    "finance": (("budget", "savings", "bills", "taxes", "loan", "bank", "mortgage", "paycheck"), ("save/saved", "pay/paid", "spend/spent", "invest/invested"), ("monthly", "tight", "overdue", "extra")),
    "cars": (("car", "tyres", "mechanic", "engine", "garage", "brakes", "fuel", "license"), ("fix/fixed", "drive/drove", "sell/sold", "wash/washed"), ("old", "electric", "noisy", "used")),
    "school": (("exam", "course", "homework", "professor", "lecture", "thesis", "grades", "semester"), ("study/studied", "pass/passed", "fail/failed", "submit/submitted"), ("hard", "final", "online", "boring")),
    "movies": (("film", "cinema", "trailer", "actor", "sequel", "documentary", "popcorn", "series"), ("watch/watched", "see/saw", "stream/streamed", "review/reviewed"), ("funny", "scary", "long", "animated")),
    "weather": (("rain", "snow", "storm", "heat", "umbrella", "forecast", "wind", "frost"), ("expect/expected", "hate/hated", "enjoy/enjoyed", "check/checked"), ("cold", "humid", "grey", "freezing")),
    "shopping": (("jacket", "sale", "shoes", "groceries", "receipt", "market", "discount", "store"), ("buy/bought", "return/returned", "order/ordered", "find/found"), ("cheap", "nice", "broken", "second-hand")),
    "home repair": (("roof", "sink", "paint", "shelves", "drill", "leak", "tiles", "window"), ("fix/fixed", "paint/painted", "replace/replaced", "install/installed"), ("leaky", "cracked", "white", "wobbly")),
    "friends": (("friend", "dinner", "party", "roommate", "game night", "barbecue", "chat", "reunion"), ("meet/met", "host/hosted", "invite/invited", "miss/missed"), ("fun", "late", "loud", "small")),
    "photography": (("camera", "lens", "photos", "tripod", "sunset", "portrait", "album", "editing"), ("shoot/shot", "edit/edited", "print/printed", "frame/framed"), ("blurry", "sharp", "golden", "wide")),
    "hiking": (("mountain", "trail", "boots", "summit", "backpack", "map", "lake", "campsite"), ("climb/climbed", "hike/hiked", "camp/camped", "get lost on/got lost on"), ("steep", "rocky", "muddy", "scenic")),
    "coffee": (("espresso", "beans", "cafe", "grinder", "latte", "barista", "mug", "roast"), ("brew/brewed", "grind/ground", "order/ordered", "try/tried"), ("strong", "bitter", "smooth", "iced")),
    "language learning": (("spanish", "vocabulary", "grammar", "tutor", "lessons", "app", "accent", "verbs"), ("learn/learned", "practise/practised", "forget/forgot", "memorise/memorised"), ("fluent", "basic", "daily", "tricky")),
    "volunteering": (("shelter", "food bank", "charity", "fundraiser", "donations", "volunteers", "event", "cleanup"), ("volunteer at/volunteered at", "organise/organised", "donate/donated", "help at/helped at"), ("local", "weekly", "small", "annual")),
    "technology": (("laptop", "phone", "update", "battery", "password", "printer", "router", "screen"), ("reset/reset", "update/updated", "replace/replaced", "back up/backed up"), ("slow", "cracked", "wireless", "new")),
    "sleep": (("bed", "mattress", "nap", "alarm", "dreams", "pillow", "insomnia", "routine"), ("sleep/slept", "wake/woke", "nap/napped", "dream/dreamed"), ("restless", "early", "deep", "comfortable")),
    "art": (("painting", "canvas", "sketch", "gallery", "watercolours", "brushes", "exhibition", "pottery"), ("paint/painted", "draw/drew", "sell/sold", "frame/framed"), ("abstract", "colourful", "tiny", "unfinished")),
    "sports": (("match", "team", "league", "coach", "season", "tickets", "goal", "stadium"), ("watch/watched", "win/won", "lose/lost", "play/played"), ("close", "exciting", "final", "away")),
    "wedding": (("wedding", "venue", "dress", "guests", "speech", "caterer", "ring", "invitations"), ("plan/planned", "attend/attended", "write/wrote", "choose/chose"), ("outdoor", "small", "formal", "lovely")),
    "baking": (("cake", "cookies", "dough", "flour", "frosting", "muffins", "pie", "sourdough"), ("bake/baked", "decorate/decorated", "knead/kneaded", "taste/tasted"), ("sweet", "fluffy", "burnt", "chocolate")),
    "cycling": (("bike", "helmet", "ride", "chain", "route", "commute", "puncture", "saddle"), ("ride/rode", "repair/repaired", "commute/commuted", "buy/bought"), ("fast", "flat", "uphill", "rainy")),
    "job search": (("interview", "resume", "offer", "recruiter", "position", "salary", "application", "portfolio"), ("apply for/applied for", "prepare/prepared", "accept/accepted", "decline/declined"), ("remote", "junior", "senior", "nervous")),
    "holidays": (("christmas", "gifts", "decorations", "turkey", "fireworks", "tree", "cards", "holiday"), ("celebrate/celebrated", "wrap/wrapped", "decorate/decorated", "spend/spent"), ("festive", "busy", "quiet", "traditional")),
    "games": (("board game", "puzzle", "chess", "video game", "console", "level", "cards", "tournament"), ("play/played", "win/won", "beat/beat", "finish/finished"), ("hard", "addictive", "cooperative", "retro")),
    "fishing": (("fish", "rod", "bait", "river", "boat", "pier", "catch", "lake"), ("catch/caught", "fish/fished", "release/released", "cast/cast"), ("big", "calm", "early", "cold")),
    "neighbours": (("neighbour", "fence", "noise", "parking", "street", "dog", "garden", "block party"), ("complain about/complained about", "talk to/talked to", "help/helped", "meet/met"), ("friendly", "noisy", "elderly", "new")),
    "news": (("election", "article", "podcast", "headline", "debate", "newspaper", "interview", "report"), ("read/read", "hear/heard", "follow/followed", "discuss/discussed"), ("political", "local", "worrying", "long")),
    "dancing": (("salsa", "class", "partner", "studio", "steps", "rhythm", "recital", "ballroom"), ("dance/danced", "learn/learned", "practise/practised", "perform/performed"), ("fast", "graceful", "beginner", "clumsy")),
    "crafts": (("knitting", "scarf", "yarn", "quilt", "sewing machine", "pattern", "beads", "needles"), ("knit/knitted", "sew/sewed", "make/made", "finish/finished"), ("warm", "handmade", "tiny", "colourful")),
}
SUBJECTS = ("I", "We", "My partner and I", "My roommate", "My friend", "My sister")
TIMES = ("yesterday", "last week", "this morning", "on Saturday", "last month", "tonight", "a few days ago", "again")
TEMPLATES = (
    "{subject} {past} the {adj} {noun} {time}.",
    "I think I should {base} the {noun} {time}.",
    "Do you know a good way to {base} {article} {adj} {noun}?",
    "The {noun} was {adj}, so {subject_lower} {past} the {noun2} instead.",
    "Can you remind me to {base} the {noun} {time}?",
    "I really want to {base} {article} {adj} {noun} soon.",
    "{subject} finally {past} the {noun} and it was {adj}.",
    "What should I do about the {adj} {noun}?",
    "You could {base} the {noun} first and then the {noun2}.",
    "That sounds {adj}; did the {noun} help with the {noun2}?",
)


def english_text(rng: random.Random, topic: str) -> str:
    """One to three sentences on ``topic`` (a key of :data:`TOPICS`)."""
    nouns, verbs, adjectives = TOPICS[topic]
    sentences = []
    for _ in range(rng.randint(1, 3)):
        base, past = rng.choice(verbs).split("/")
        adjective = rng.choice(adjectives)
        subject = rng.choice(SUBJECTS)
        sentences.append(rng.choice(TEMPLATES).format(
            subject=subject, subject_lower=subject if subject == "I" else subject.lower(), past=past, base=base,
            adj=adjective, article="an" if adjective[0] in "aeiou" else "a", noun=rng.choice(nouns),
            noun2=rng.choice(nouns), time=rng.choice(TIMES)))
    return " ".join(sentences)
