"""Registry entries of the built-in envs (one line each; modules are imported only when an env is made)."""

from gigpo.envs.registry import register

register("gridgoal", "gigpo.envs.gridgoal:GridGoalEnv", "Walk to the goal on a small open grid (the quickstart env).")
register("sokoban", "gigpo.envs.sokoban:SokobanEnv", "Push boxes onto targets; rooms made by reverse play.")
register("frozenlake", "gigpo.envs.frozenlake:FrozenLakeEnv", "gymnasium FrozenLake on a random map per seed.")
register("webshop", "gigpo.envs.webshop:WebShopEnv", "Offline WebShop: search, browse and buy from a generated catalog.")
register("webshop-original", "gigpo.envs.webshop.env:OriginalWebShopEnv", "WebShop's own products and human goals, read from env.data_dir (never downloaded).")
register("search", "gigpo.envs.search:SearchEnv", "Search-R1-style QA: search a corpus, then answer (exact match).")
register("alfworld", "gigpo.envs.alfworld.real:AlfWorldEnv", "ALFWorld's own text games (TextWorld PDDL engine), read from env.data_dir / $ALFWORLD_DATA (never downloaded).")
register("alfworld-gen", "gigpo.envs.alfworld.env:AlfWorldGenEnv", "Generated ALFWorld household games (all six task types) in ALFWorld's domain, on the same engine.")
register("lock", "gigpo.envs.lock:LockEnv", "Combination-lock rooms with traps: sparse reward, recurring states (credit assignment).")
# Noisy variants: ads inserted into observations (the GiGPO paper's noise experiment).
register("webshop-noisy", "gigpo.envs.wrappers:make_noisy", "webshop with ads inserted into pages.", base="webshop")
register("webshop-original-noisy", "gigpo.envs.wrappers:make_noisy", "webshop-original with ads inserted into pages.", base="webshop-original")
register("sokoban-noisy", "gigpo.envs.wrappers:make_noisy", "sokoban with ads inserted into observations.", base="sokoban")
register("gridgoal-noisy", "gigpo.envs.wrappers:make_noisy", "gridgoal with ads inserted into observations.", base="gridgoal")
register("lock-noisy", "gigpo.envs.wrappers:make_noisy", "lock with ads inserted into observations (exact anchors become rare).", base="lock")
# Multi-turn dialogue: the agent talks with a simulated user (env.user: rules | openai:MODEL).
register("dialogue-guess", "gigpo.envs.dialogue.guess:GuessEnv", "Dialogue: ask about the user's secret animal, then name it.")
register("dialogue-booking", "gigpo.envs.dialogue.booking:BookingEnv", "Dialogue: gather a customer's booking slots, offer a restaurant, book it.")
