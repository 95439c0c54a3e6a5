"""Word lists of the tiny tokenizer: env action/format words (one token each) and common English words."""

from __future__ import annotations

#: Action words, response-format tags and recurring observation words of the built-in envs
#: (gridgoal, sokoban, frozenlake, webshop, search) and of the prompt/response formats. Each becomes ONE token.
#: Lines: grid moves; webshop/search actions and page words; prompt/response format; grid legends.
_ENV_TEXT = """
up down left right north south east west stay wait noop move push pull go step steps
search click buy now back to next prev previous page description features reviews attributes options
option item items results result product products price size color query answer information documents
document doc finish submit done
think action actions observation task goal instruction instructions history admissible valid invalid
reward response format system user assistant turn
box boxes target targets wall walls player floor hole holes lake frozen start grid cell row column
agent empty reached won lost fell
"""

#: A few hundred frequent English function and content words, so prompts are mostly whole-word tokens.
_COMMON_TEXT = """
a an the and or not no yes but if then else so as than because of in on at by for with from into
onto out off over under about after before between through during without within until while where
when what which who whom whose why how there here this that these those it its i you he she we they
me him her us them my your his our their is are was were be been being am do does did have has had
can could will would shall should may might must all any each every some many much more most few
less least other another such only own same very too also just again once one two three four five
six seven eight nine ten first second third last new old good bad best better small large big long
short high low top bottom middle center side end open close closed get got make made take give put
use used find found see look show tell ask try keep let help need want like know think say said come
leave reach choose select pick return follow avoid win lose play stop continue repeat write read
output input list exactly current position state map room game rules rule way path place point
number word words text name type time day year people person thing world water home house work life
part case fact question problem example order level line lines space character symbol symbols means
mean shown below above near far around away toward towards inside outside already still never always
often maybe please cannot true false none null free quality black white red blue green yellow pink
gray grey brown women men kids pack set inch inches ounce count dollars shoes shirt dress bag phone
hair skin care natural organic easy lasting machine wash cotton leather plastic metal wood glass
paper cup light dark soft hard fast slow hot cold warm cool born city country capital river film
book song album band team club school university president king queen war died founded located known
called named written directed played released american british english french german national
"""

ENV_WORDS: tuple[str, ...] = tuple(dict.fromkeys(_ENV_TEXT.split()))
COMMON_WORDS: tuple[str, ...] = tuple(dict.fromkeys(_COMMON_TEXT.split()))
