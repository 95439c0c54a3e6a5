"""How a shopper words what the catalog calls an attribute, option value or product type (hard difficulty).

WebShop's human instructions rarely repeat the product's own strings: "long sleeved", "without gluten", "xl",
"12 oz", "pack of 6". These tables give such wordings (synonyms, hypernyms, units in another form, implied needs);
the goal's *reward* fields keep the catalog strings, so only finding the product gets harder, never scoring it.
"""

from __future__ import annotations

import random
import re

#: Attribute -> other ways a shopper says it. None of them contains the attribute itself.
ATTRIBUTE_WORDINGS: dict[str, tuple[str, ...]] = {
    "acid free": ("archival quality", "ph neutral"), "adjustable strap": ("a strap i can adjust",),
    "age 3": ("for a three year old", "for preschoolers"), "all weather": ("for rain or shine", "year round"),
    "anti slip": ("grippy", "that won't slide"), "assembly required": ("that i put together myself",),
    "assorted colors": ("in mixed colours", "multicolored"), "auto on off": ("that turns on at dusk",),
    "battery free": ("no batteries needed",), "birthday gift": ("to give as a present",),
    "bleed proof": ("that won't bleed through",), "bluetooth connectivity": ("that pairs with my phone", "wireless"),
    "bpa free": ("without bpa",), "breathable mesh": ("with airflow", "well ventilated"),
    "built in microphone": ("with a mic",), "bulk pack": ("in bulk", "a big multipack"),
    "button closure": ("that buttons up",), "car accessories": ("for my vehicle",),
    "carrying strap": ("with a shoulder strap", "easy to carry"), "chew resistant": ("for heavy chewers",),
    "cruelty free": ("not tested on animals",), "daily wear": ("for everyday", "for every day use"),
    "dairy free": ("without milk", "lactose free"), "dermatologist tested": ("approved by skin doctors",),
    "digital display": ("with an lcd screen",), "dishwasher safe": ("that can go in the dishwasher",),
    "drainage hole": ("that drains well",), "dry skin": ("for my flaky skin",), "dual band": ("2.4 and 5 ghz",),
    "easy apply": ("simple to put on",), "easy assemble": ("quick to put together", "with simple assembly"),
    "easy clean": ("simple to wipe down", "low maintenance"), "easy install": ("simple to mount", "tool free"),
    "easy setup": ("quick to pitch", "simple to set up"), "easy store": ("that packs away",),
    "easy swallow": ("small pills",), "eco friendly": ("sustainable", "green"),
    "educational toy": ("that teaches", "learning"), "elastic waist": ("with a stretchy waistband",),
    "energy boost": ("for more energy",), "even heating": ("that heats evenly",),
    "family game": ("for game night",), "fast acting": ("that works quickly",),
    "fast charging": ("quick charge", "that charges quickly"), "fine motor": ("for hand skills",),
    "food grade": ("food safe",), "fragrance free": ("unscented", "without perfume"),
    "freezer safe": ("that can be frozen",), "frost resistant": ("that survives winter", "cold hardy"),
    "gift box": ("gift wrapped", "in a present box"), "gluten free": ("without gluten", "celiac safe"),
    "hair loss": ("for thinning hair",), "hand wash": ("washable by hand",), "hands free": ("no hands",),
    "heat resistant": ("heatproof",), "heavy duty": ("sturdy", "industrial strength"),
    "height adjustable": ("sit stand",), "high definition": ("hd", "1080p"), "high density": ("dense", "firm"),
    "high pressure": ("powerful spray",), "high protein": ("protein packed",), "immune support": ("for immunity",),
    "individually wrapped": ("single serve packs",), "indoor cats": ("for a house cat",),
    "induction compatible": ("that works on induction",), "joint support": ("for my knees",),
    "keto friendly": ("low carb",), "kosher certified": ("kosher",), "large breed": ("for a big dog",),
    "latex free": ("without latex",), "lay flat": ("that opens flat",), "leak proof": ("that doesn't spill",),
    "lid included": ("with a cover",), "lightweight design": ("light", "featherweight"),
    "living room": ("for the lounge", "for the family room"), "lockable drawer": ("with a lock",),
    "long battery life": ("that lasts all day on a charge",), "long lasting": ("durable", "that lasts"),
    "long sleeve": ("long sleeved", "with full sleeves"), "loop recording": ("that records continuously",),
    "low calorie": ("light", "diet"), "low sugar": ("less sweet", "reduced sugar"),
    "lumbar support": ("good for my lower back",), "machine wash": ("machine washable", "washer safe"),
    "machine washable": ("washer safe", "that i can throw in the washer"), "microwave safe": ("microwavable",),
    "moisture wicking": ("that keeps sweat off", "sweat wicking"), "natural ingredients": ("all natural",),
    "noise cancelling": ("that blocks out noise", "anc"), "non gmo": ("gmo free",),
    "non slip": ("grippy", "skid proof"), "non toxic": ("safe for kids",), "odor control": ("that fights smells",),
    "oven safe": ("ovenproof",), "paraben free": ("without parabens",), "plant based": ("vegan",),
    "plug play": ("no drivers needed",), "portable design": ("portable", "easy to carry"),
    "quick dry": ("fast drying",), "quick drying": ("dries fast",), "quick release": ("that snaps off",),
    "quiet operation": ("silent", "low noise"), "ready to eat": ("no cooking needed",),
    "reflective stitching": ("visible at night",), "relaxed fit": ("loose fitting", "roomy"),
    "removable cover": ("with a washable cover",), "reusable design": ("reusable",),
    "rubber sole": ("with a grippy sole",), "rust proof": ("rustproof", "that won't rust"),
    "scratch free": ("that won't scratch the paint",), "sensitive skin": ("for easily irritated skin",),
    "shock absorbing": ("cushioned",), "short sleeve": ("short sleeved", "t-shirt style"),
    "smooth writing": ("that glides",), "soft touch": ("super soft", "cuddly"),
    "solar powered": ("that charges in the sun", "sun powered"), "solid wood": ("real wood", "hardwood"),
    "space saving": ("compact", "for small spaces"), "stem learning": ("science", "for young engineers"),
    "storage space": ("with room to store things", "with storage"), "streak free": ("that leaves no streaks",),
    "sugar free": ("without sugar", "no added sugar"), "sulfate free": ("without sulfates",),
    "sweat resistant": ("sweatproof",), "third party tested": ("independently tested", "lab verified"),
    "travel friendly": ("for trips",), "travel size": ("carry on size", "mini"),
    "tufted design": ("button tufted",), "universal fit": ("that fits any model",),
    "unscented formula": ("no fragrance", "unscented"), "usb c": ("type c",), "uv resistant": ("sun proof",),
    "vegan friendly": ("vegan", "plant based"), "wall mounted": ("that hangs on the wall",),
    "warm white": ("soft yellow light",), "water resistant": ("waterproof", "splash proof"),
    "waterproof lining": ("lined against water",), "weather resistant": ("weatherproof", "for outdoor use"),
}

#: Product type -> hypernyms or synonyms ("sneaker" -> "athletic shoes"). Types not listed keep their own word.
TYPE_WORDINGS: dict[str, tuple[str, ...]] = {
    "shirt": ("top", "button down"), "hoodie": ("sweatshirt",), "jacket": ("coat",), "sweater": ("pullover",),
    "polo": ("golf top",), "dress": ("frock",), "blouse": ("top",), "cardigan": ("knit top",), "tunic": ("top",),
    "sneaker": ("athletic shoes", "trainers"), "boot": ("winter footwear",), "sandal": ("summer shoes",),
    "loafer": ("slip on shoes",), "slipper": ("house shoes",), "serum": ("skin treatment",),
    "moisturizer": ("face cream", "lotion"), "cleanser": ("face wash",), "toner": ("skin tonic",),
    "shampoo": ("hair wash",), "wig": ("hairpiece",), "extension": ("hair piece",), "lipstick": ("lip color",),
    "foundation": ("base makeup",), "mascara": ("lash makeup",), "palette": ("eyeshadow set",),
    "chips": ("snack",), "crackers": ("snack",), "pretzels": ("snack",), "popcorn": ("snack",),
    "jerky": ("dried meat",), "tea": ("hot drink",), "coffee": ("brew",), "juice": ("drink",),
    "lemonade": ("drink",), "pasta": ("noodles",), "granola": ("cereal",), "oatmeal": ("porridge",),
    "seasoning": ("spice mix",), "headphones": ("cans", "audio gear"), "earbuds": ("in ear audio",),
    "headset": ("gaming audio",), "speaker": ("audio system",), "keyboard": ("typing device",),
    "mouse": ("pointer",), "hub": ("adapter",), "monitor": ("display",), "charger": ("power adapter",),
    "case": ("cover",), "cable": ("cord",), "powerbank": ("portable battery",), "sofa": ("couch",),
    "ottoman": ("footstool",), "bookshelf": ("bookcase",), "recliner": ("armchair",), "nightstand": ("bedside table",),
    "dresser": ("chest of drawers",), "wardrobe": ("closet",), "rug": ("carpet",), "curtain": ("drapes",),
    "lamp": ("light",), "pillow": ("cushion",), "skillet": ("frying pan",), "saucepan": ("pot",),
    "griddle": ("flat pan",), "container": ("storage box",), "jar": ("canning jar",), "lunchbox": ("lunch bag",),
    "bottle": ("flask",), "kettle": ("water boiler",), "airfryer": ("air fryer",), "grinder": ("mill",),
    "planter": ("flower pot",), "pot": ("plant pot",), "lantern": ("outdoor light",), "statue": ("sculpture",),
    "hammock": ("swing bed",), "lounger": ("deck chair",), "dumbbell": ("hand weight", "free weight"),
    "kettlebell": ("weight",), "yoga mat": ("exercise mat",), "tent": ("shelter",), "backpack": ("rucksack", "pack"),
    "headlamp": ("head torch",), "cooler": ("ice chest",), "helmet": ("head protection",), "pump": ("inflator",),
    "blocks": ("building set",), "puzzle": ("jigsaw",), "board game": ("tabletop game",), "plush": ("stuffed animal",),
    "teddy bear": ("stuffed bear",), "leash": ("lead",), "collar": ("neck band",), "crate": ("kennel",),
    "scratcher": ("scratching pad",), "feeder": ("food bowl",), "aquarium": ("fish tank",), "pen": ("ballpoint",),
    "marker": ("felt tip",), "notebook": ("journal",), "desk": ("table",), "chair": ("seat",),
    "organizer": ("caddy",), "planner": ("agenda",), "multivitamin": ("daily vitamin",), "probiotic": ("gut supplement",),
    "capsules": ("pills",), "detergent": ("soap",), "wipes": ("towelettes",), "spray": ("cleaner",),
    "mop": ("floor cleaner",), "brace": ("support",), "massager": ("massage tool",), "seat cover": ("seat protector",),
    "floor mat": ("car mat",), "phone mount": ("phone holder",), "sunshade": ("windshield shade",),
    "vacuum": ("hoover",), "jack": ("lift",), "dash cam": ("dashboard camera",),
}

#: Option values -> other forms (sizes as letters, colour synonyms, flavour and style words).
VALUE_WORDINGS: dict[str, tuple[str, ...]] = {
    "x-small": ("xs", "extra small"), "small": ("s",), "medium": ("m", "med"), "large": ("l",),
    "x-large": ("xl", "extra large"), "xx-large": ("xxl", "2xl"), "one size": ("free size",),
    "navy blue": ("navy",), "heather grey": ("heather gray",), "olive green": ("olive",), "light blue": ("sky blue",),
    "charcoal": ("dark gray",), "grey": ("gray",), "space grey": ("space gray",), "stone grey": ("stone gray",),
    "sage green": ("sage",), "lime green": ("lime",), "midnight blue": ("dark navy",), "burgundy": ("maroon",),
    "ruby red": ("deep red",), "warm beige": ("tan",), "multicolor": ("multi colored",), "assorted": ("mixed",),
    "unscented": ("no scent", "fragrance free"), "citrus": ("lemon orange",), "sea salt": ("salted",),
    "barbecue": ("bbq",), "sour cream onion": ("sour cream and onion",), "original": ("classic", "plain"),
    "unflavored": ("plain",), "tropical punch": ("fruit punch",), "garlic herb": ("herb and garlic",),
    "basic": ("standard",), "pro": ("professional",), "max": ("biggest model",), "mini": ("smallest model",),
    "plus": ("upgraded model",), "front seats": ("front row",), "full set": ("complete set",),
    "rear seats": ("back row",), "single": ("one piece",), "2 piece": ("pair",),
    "queen": ("queen-size",), "king": ("king-size",),
}
#: Unit -> (other spellings with the same number, conversions as (factor, unit)).
_UNIT_FORMS: dict[str, tuple[tuple[str, ...], tuple[tuple[float, str], ...]]] = {
    "ounce": (("oz", "-ounce"), ()), "pound": (("lb", "lbs"), ((16, "oz"),)),
    "fl oz": (("fluid ounce",), ((30, "ml"),)), "quart": (("qt",), ((32, "oz"),)),
    "inch": (("in", "-inch"), ((2.5, "cm"),)), "count": (("ct", "pack"), ()), "pieces": (("piece", "-piece"), ()),
}
_UNIT = re.compile(r"^(\d+) (ounce|pound|fl oz|quart|inch|count|pieces)$")


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def value_wordings(value: str) -> tuple[str, ...]:
    """Other ways to write an option value: the table's, or for "<n> <unit>" other spellings and conversions
    ("12 ounce" -> "12 oz", "12-ounce"; "1 pound" -> "1 lb", "16 oz"; "6 count" -> "pack of 6"). May be empty."""
    m = _UNIT.match(value)
    if m is None:
        return VALUE_WORDINGS.get(value, ())
    n, unit = m.group(1), m.group(2)
    spellings, conversions = _UNIT_FORMS[unit]
    out = [f"{n}{s}" if s.startswith("-") else f"{n} {s}" for s in spellings]
    out += [f"{_number(int(n) * f)} {u}" for f, u in conversions]
    if unit == "count":
        out.append(f"pack of {n}")
    return tuple(out)


def reword(rng: random.Random, phrase: str, table: dict[str, tuple[str, ...]] | None, p: float) -> str:
    """With probability ``p`` one of the phrase's other wordings (``table``, or ``value_wordings`` when None), else
    the phrase itself; also the phrase itself when it has no other wording. One ``rng`` draw when ``p`` > 0."""
    if p <= 0.0:
        return phrase
    if rng.random() >= p:
        return phrase
    forms = value_wordings(phrase) if table is None else table.get(phrase, ())
    return rng.choice(forms) if forms else phrase
