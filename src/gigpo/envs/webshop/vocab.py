"""Word lists the catalog generator draws from: categories, product types, attributes, options, price bands."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Sub:
    """A sub-category: its category-path tail, the search query products were "scraped" with, product-type nouns."""

    path: str
    query: str
    types: tuple[str, ...]
    #: Option pools that replace the category's (e.g. numeric shoe sizes).
    options: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Category:
    """A top-level category. ``materials`` and ``audiences`` are nouns (they count for the type factor)."""

    key: str
    root: str
    subs: tuple[Sub, ...]
    materials: tuple[str, ...]
    adjectives: tuple[str, ...]
    audiences: tuple[str, ...]
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]
    price: tuple[float, float]


_APPAREL_COLORS = (
    "black", "white", "navy blue", "heather grey", "red", "olive green", "burgundy", "khaki",
    "light blue", "charcoal", "pink", "beige",
)
_SIZES = ("x-small", "small", "medium", "large", "x-large", "xx-large")
_HOME_COLORS = ("white", "black", "grey", "walnut", "natural", "espresso", "ivory", "teal", "sage green")
_PACKS = ("1 count", "2 count", "4 count", "6 count", "12 count")

CATEGORIES: tuple[Category, ...] = (
    Category(
        key="fashion",
        root="Clothing, Shoes & Jewelry",
        subs=(
            Sub("Men › Clothing", "men's clothing", ("shirt", "hoodie", "jacket", "sweater", "polo")),
            Sub("Women › Clothing", "women's clothing", ("dress", "blouse", "cardigan", "skirt", "tunic")),
            Sub("Shoes", "shoes", ("sneaker", "boot", "sandal", "loafer", "slipper"),
                {"size": ("6", "7", "8", "9", "10", "11", "12", "13")}),
        ),
        materials=("cotton", "polyester", "fleece", "denim", "wool", "leather", "linen", "suede"),
        adjectives=("slim fit", "classic", "casual", "lightweight", "vintage", "oversized"),
        audiences=("men", "women", "teens"),
        attributes=(
            "machine wash", "long sleeve", "short sleeve", "button closure", "elastic waist", "relaxed fit",
            "hand wash", "quick drying", "moisture wicking", "rubber sole", "non slip", "daily wear",
        ),
        options={"color": _APPAREL_COLORS, "size": _SIZES},
        price=(12.0, 95.0),
    ),
    Category(
        key="beauty",
        root="Beauty & Personal Care",
        subs=(
            Sub("Skin Care › Face", "face skin care", ("serum", "moisturizer", "cleanser", "toner", "mask")),
            Sub("Hair Care", "hair care", ("shampoo", "conditioner", "wig", "extension", "brush")),
            Sub("Makeup", "makeup", ("lipstick", "foundation", "mascara", "eyeliner", "palette"),
                {"color": ("ruby red", "nude", "coral", "plum", "mauve", "warm beige"), "scent": ()}),
        ),
        materials=("vitamin", "collagen", "argan", "aloe", "charcoal", "keratin", "retinol"),
        adjectives=("gentle", "hydrating", "nourishing", "professional", "organic"),
        audiences=("women", "men", "teens"),
        attributes=(
            "cruelty free", "paraben free", "long lasting", "sulfate free", "natural ingredients",
            "dry skin", "sensitive skin", "easy apply", "travel size", "fragrance free", "hair loss", "dermatologist tested",
        ),
        options={
            "scent": ("lavender", "vanilla", "coconut", "unscented", "rose", "citrus", "mint"),
            "size": ("1 fl oz", "2 fl oz", "4 fl oz", "8 fl oz", "16 fl oz"),
        },
        price=(6.0, 60.0),
    ),
    Category(
        key="grocery",
        root="Grocery & Gourmet Food",
        subs=(
            Sub("Snacks › Chips", "snack foods", ("chips", "crackers", "pretzels", "popcorn", "jerky")),
            Sub("Beverages", "beverages", ("tea", "coffee", "juice", "lemonade", "kombucha"),
                {"flavor name": ("original", "vanilla", "hazelnut", "peach", "mango", "caramel")}),
            Sub("Pantry Staples", "pantry staples", ("pasta", "granola", "honey", "oatmeal", "seasoning"),
                {"flavor name": ("original", "cinnamon", "maple", "garlic herb", "blueberry")}),
        ),
        materials=("almond", "oat", "quinoa", "cacao", "ginger", "cinnamon", "matcha"),
        adjectives=("crunchy", "healthy", "gourmet", "roasted", "artisan"),
        audiences=("kids", "adults", "families"),
        attributes=(
            "gluten free", "non gmo", "low sugar", "keto friendly", "plant based", "high protein",
            "low calorie", "sugar free", "kosher certified", "dairy free", "individually wrapped", "ready to eat",
        ),
        options={
            "flavor name": ("sea salt", "barbecue", "sour cream onion", "honey mustard", "chili lime", "original"),
            "size": ("5 ounce", "8 ounce", "12 ounce", "1 pound", "2 pound"),
        },
        price=(4.0, 45.0),
    ),
    Category(
        key="electronics",
        root="Electronics",
        subs=(
            Sub("Headphones", "headphones", ("headphones", "earbuds", "headset", "speaker", "soundbar")),
            Sub("Computers › Accessories", "computer accessories", ("keyboard", "mouse", "hub", "webcam", "monitor")),
            Sub("Cell Phones › Accessories", "phone accessories", ("charger", "case", "cable", "stand", "powerbank")),
        ),
        materials=("aluminum", "silicone", "nylon", "carbon", "titanium", "glass"),
        adjectives=("wireless", "portable", "ergonomic", "compact", "rechargeable"),
        audiences=("gamers", "students", "travelers"),
        attributes=(
            "noise cancelling", "fast charging", "bluetooth connectivity", "usb c", "high definition",
            "long battery life", "water resistant", "plug play", "hands free", "easy install", "built in microphone",
            "dual band",
        ),
        options={
            "color": ("black", "white", "space grey", "silver", "midnight blue", "rose gold"),
            "style": ("basic", "pro", "max", "mini", "plus"),
        },
        price=(9.0, 250.0),
    ),
    Category(
        key="furniture",
        root="Home & Kitchen",
        subs=(
            Sub("Furniture › Living Room", "living room furniture", ("sofa", "ottoman", "bookshelf", "recliner", "bench")),
            Sub("Furniture › Bedroom", "bedroom furniture", ("nightstand", "dresser", "headboard", "wardrobe", "bed")),
            Sub("Home Decor", "home decor", ("rug", "curtain", "lamp", "mirror", "pillow")),
        ),
        materials=("oak", "velvet", "rattan", "bamboo", "metal", "marble", "pine"),
        adjectives=("modern", "rustic", "mid century", "minimalist", "farmhouse"),
        audiences=("bedroom", "apartment", "office"),
        attributes=(
            "easy assemble", "solid wood", "storage space", "living room", "space saving", "high density",
            "easy clean", "non slip", "heavy duty", "assembly required", "tufted design", "wall mounted",
        ),
        options={"color": _HOME_COLORS, "size": ("small", "medium", "large", "queen", "king")},
        price=(25.0, 600.0),
    ),
    Category(
        key="kitchen",
        root="Home & Kitchen",
        subs=(
            Sub("Kitchen & Dining › Cookware", "cookware", ("skillet", "saucepan", "wok", "dutch oven", "griddle")),
            Sub("Kitchen & Dining › Storage", "food storage", ("container", "jar", "canister", "lunchbox", "bottle")),
            Sub("Kitchen & Dining › Appliances", "kitchen appliances", ("blender", "toaster", "kettle", "airfryer", "grinder")),
        ),
        materials=("stainless steel", "cast iron", "ceramic", "borosilicate", "copper", "granite"),
        adjectives=("nonstick", "airtight", "stackable", "dishwasher safe", "professional"),
        audiences=("chefs", "kitchen", "families"),
        attributes=(
            "dishwasher safe", "bpa free", "oven safe", "leak proof", "easy clean", "induction compatible",
            "heat resistant", "food grade", "microwave safe", "freezer safe", "lid included", "even heating",
        ),
        options={
            "color": ("black", "red", "silver", "turquoise", "cream", "graphite"),
            "capacity": ("1 quart", "2 quart", "3 quart", "5 quart", "8 quart"),
        },
        price=(10.0, 180.0),
    ),
    Category(
        key="garden",
        root="Patio, Lawn & Garden",
        subs=(
            Sub("Gardening › Planters", "planters", ("planter", "pot", "trellis", "birdbath", "raised bed")),
            Sub("Outdoor Decor", "outdoor decor", ("lantern", "wind chime", "string lights", "fountain", "statue")),
            Sub("Patio Furniture", "patio furniture", ("hammock", "umbrella", "lounger", "swing", "gazebo")),
        ),
        materials=("resin", "terracotta", "wicker", "steel", "teak", "concrete"),
        adjectives=("weatherproof", "solar powered", "decorative", "folding", "outdoor"),
        audiences=("patio", "backyard", "balcony"),
        attributes=(
            "uv resistant", "rust proof", "drainage hole", "weather resistant", "solar powered",
            "easy assemble", "water resistant", "auto on off", "warm white", "heavy duty", "portable design", "frost resistant",
        ),
        options={
            "color": ("green", "brown", "black", "white", "terracotta", "stone grey"),
            "size": ("6 inch", "8 inch", "10 inch", "12 inch", "16 inch"),
        },
        price=(8.0, 300.0),
    ),
    Category(
        key="sports",
        root="Sports & Outdoors",
        subs=(
            Sub("Exercise & Fitness", "fitness equipment", ("dumbbell", "kettlebell", "yoga mat", "resistance band", "jump rope")),
            Sub("Outdoor Recreation › Camping", "camping gear", ("tent", "sleeping bag", "backpack", "headlamp", "cooler")),
            Sub("Cycling", "cycling", ("helmet", "bike light", "saddle", "water bottle", "pump")),
        ),
        materials=("neoprene", "foam", "ripstop", "rubber", "aluminum", "nylon"),
        adjectives=("adjustable", "ultralight", "durable", "foldable", "professional"),
        audiences=("hiking", "training", "athletes"),
        attributes=(
            "non slip", "sweat resistant", "carrying strap", "easy setup", "water resistant", "high density",
            "adjustable strap", "lightweight design", "shock absorbing", "eco friendly", "breathable mesh", "quick release",
        ),
        options={
            "color": ("black", "blue", "purple", "orange", "grey", "lime green"),
            "size": ("small", "medium", "large", "x-large", "one size"),
        },
        price=(10.0, 220.0),
    ),
    Category(
        key="toys",
        root="Toys & Games",
        subs=(
            Sub("Building Toys", "building toys", ("blocks", "magnetic tiles", "train set", "construction kit", "marble run")),
            Sub("Puzzles & Games", "puzzles", ("puzzle", "board game", "card game", "chess set", "dominoes")),
            Sub("Stuffed Animals", "plush toys", ("teddy bear", "plush", "unicorn", "dinosaur", "puppet")),
        ),
        materials=("wooden", "plush", "cardboard", "felt", "bamboo"),
        adjectives=("educational", "colorful", "classic", "interactive", "giant"),
        audiences=("toddlers", "kids", "family"),
        attributes=(
            "non toxic", "educational toy", "birthday gift", "easy store", "stem learning", "age 3",
            "soft touch", "fine motor", "family game", "travel friendly", "battery free", "gift box",
        ),
        options={
            "color": ("rainbow", "pink", "blue", "brown", "yellow", "multicolor"),
            "piece count": ("100 pieces", "300 pieces", "500 pieces", "1000 pieces"),
        },
        price=(7.0, 80.0),
    ),
    Category(
        key="pets",
        root="Pet Supplies",
        subs=(
            Sub("Dogs › Beds & Furniture", "dog supplies", ("dog bed", "leash", "harness", "collar", "crate")),
            Sub("Cats › Toys", "cat supplies", ("cat tree", "scratcher", "litter box", "cat toy", "feeder")),
            Sub("Fish & Aquatic Pets", "aquarium supplies", ("aquarium", "filter", "heater", "gravel", "net")),
        ),
        materials=("memory foam", "nylon", "sisal", "acrylic", "canvas"),
        adjectives=("orthopedic", "reflective", "automatic", "calming", "washable"),
        audiences=("dogs", "cats", "puppies"),
        attributes=(
            "machine washable", "non slip", "odor control", "chew resistant", "easy clean", "reflective stitching",
            "quick release", "waterproof lining", "large breed", "indoor cats", "quiet operation", "removable cover",
        ),
        options={
            "color": ("grey", "brown", "blue", "red", "black", "camo"),
            "size": ("small", "medium", "large", "x-large"),
        },
        price=(6.0, 150.0),
    ),
    Category(
        key="office",
        root="Office Products",
        subs=(
            Sub("Office Supplies › Writing", "writing supplies", ("pen", "marker", "highlighter", "pencil", "notebook")),
            Sub("Office Furniture", "office furniture", ("desk", "chair", "footrest", "filing cabinet", "monitor arm")),
            Sub("Organization", "desk organization", ("organizer", "binder", "label maker", "tray", "planner")),
        ),
        materials=("mesh", "gel", "kraft", "steel", "acrylic", "leather"),
        adjectives=("ergonomic", "refillable", "fine point", "executive", "compact"),
        audiences=("students", "teachers", "office"),
        attributes=(
            "lumbar support", "smooth writing", "quick dry", "height adjustable", "acid free", "bleed proof",
            "easy assemble", "lockable drawer", "assorted colors", "bulk pack", "lay flat", "heavy duty",
        ),
        options={
            "color": ("black", "blue", "red", "assorted", "white", "green"),
            "pack": _PACKS,
        },
        price=(3.0, 350.0),
    ),
    Category(
        key="health",
        root="Health & Household",
        subs=(
            Sub("Vitamins & Supplements", "dietary supplements", ("multivitamin", "probiotic", "gummies", "capsules", "powder")),
            Sub("Household Supplies › Cleaning", "cleaning supplies", ("detergent", "wipes", "spray", "sponge", "mop")),
            Sub("Medical Supplies", "medical supplies", ("thermometer", "bandage", "brace", "humidifier", "massager")),
        ),
        materials=("magnesium", "zinc", "turmeric", "elderberry", "microfiber", "eucalyptus"),
        adjectives=("extra strength", "daily", "clinical", "gentle", "advanced"),
        audiences=("adults", "seniors", "athletes"),
        attributes=(
            "immune support", "easy swallow", "third party tested", "vegan friendly", "unscented formula",
            "streak free", "reusable design", "fast acting", "joint support", "energy boost", "plant based", "latex free",
        ),
        options={
            "flavor name": ("berry", "orange", "unflavored", "lemon", "tropical punch", "grape"),
            "size": ("30 count", "60 count", "90 count", "120 count", "180 count"),
        },
        price=(5.0, 90.0),
    ),
    Category(
        key="automotive",
        root="Automotive",
        subs=(
            Sub("Interior Accessories", "car interior accessories", ("seat cover", "floor mat", "phone mount", "organizer", "sunshade")),
            Sub("Car Care", "car care", ("wax", "polish", "microfiber towel", "pressure washer", "vacuum")),
            Sub("Tools & Equipment", "automotive tools", ("jump starter", "tire inflator", "jack", "wrench set", "dash cam")),
        ),
        materials=("leatherette", "rubber", "microfiber", "carbon fiber", "steel"),
        adjectives=("universal fit", "heavy duty", "cordless", "all weather", "premium"),
        audiences=("cars", "trucks", "suvs"),
        attributes=(
            "universal fit", "easy install", "all weather", "scratch free", "car accessories", "water resistant",
            "high pressure", "anti slip", "fast charging", "loop recording", "digital display", "heavy duty",
        ),
        options={
            "color": ("black", "beige", "grey", "red", "blue"),
            "style": ("front seats", "full set", "rear seats", "single", "2 piece"),
        },
        price=(9.0, 200.0),
    ),
)

#: Words used to compose brand names (proper nouns, so they count as nouns for the type factor).
BRAND_ONSETS = ("b", "c", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "cr", "tr", "st", "pl")
BRAND_VOWELS = ("a", "e", "i", "o", "u", "ia", "eo")
BRAND_CODAS = ("", "n", "x", "r", "l", "s", "m", "k")

REVIEW_TITLES = (
    ("Great value", 5), ("Works as described", 4), ("Pretty good", 4), ("Not bad", 3),
    ("Could be better", 2), ("Disappointed", 1), ("Love it", 5), ("Okay for the price", 3),
)
