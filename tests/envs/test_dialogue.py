"""The dialogue envs with the rules user: grammar, determinism, paraphrases vs true state, oracle, bad input."""

from __future__ import annotations

import pytest

from gigpo.envs import make
from gigpo.envs.dialogue import EMPTY_MARKER, TRUNCATION_MARKER, Intent, clean_reply, parse_intent
from gigpo.envs.dialogue.booking import SLOT_WORDS as BOOKING_SLOTS
from gigpo.envs.play import play

ENVS = ("dialogue-guess", "dialogue-booking")


def run(env, policy, seed):
    obs, info = env.reset(seed)
    transcript, done = [("", obs, info["state_key"])], False
    while not done:
        action = policy(env)
        obs, reward, done, info = env.step(action)
        transcript.append((action, obs, info["state_key"], reward))
    return transcript, info


def test_grammar_precedence_and_slots():
    names = ["luna", "basil"]
    assert parse_intent("Shall I book luna for you?", BOOKING_SLOTS, names, booking=True) == Intent("book", name="luna")
    assert parse_intent("please confirm", BOOKING_SLOTS, names, booking=True) == Intent("book")
    assert parse_intent("What about Basil, on which day?", BOOKING_SLOTS, names, True) == Intent("offer", name="basil")
    assert parse_intent("How many people, and what day?", BOOKING_SLOTS, names, True) == Intent("ask", slot="people")
    assert parse_intent("Where would you like to eat?", BOOKING_SLOTS, names, True) == Intent("ask", slot="area")
    assert parse_intent("lovely weather today", BOOKING_SLOTS, names, True) == Intent("other")
    # Without booking=True (the guessing game) "book" is not special.
    assert parse_intent("book", BOOKING_SLOTS, names) == Intent("other")


def test_clean_reply_marks_empty_and_long():
    assert clean_reply("  \n\t ") == (EMPTY_MARKER, False)
    text, cut = clean_reply("word " * 500, max_chars=50)
    assert cut and text.endswith(TRUNCATION_MARKER) and len(text) == 50 + len(TRUNCATION_MARKER)


@pytest.mark.parametrize("name", ENVS)
def test_oracle_succeeds(name):
    env = make(name)
    results = [run(env, lambda e: e.oracle_action(), seed)[1] for seed in range(100)]
    assert sum(r["won"] for r in results) / len(results) >= 0.95
    assert all(r["admissible_actions"] is None for r in results)


@pytest.mark.parametrize("name", ENVS)
def test_same_seed_same_conversation(name):
    a, b = make(name), make(name)
    assert run(a, lambda e: e.oracle_action(), 7) == run(b, lambda e: e.oracle_action(), 7)
    assert a.task == b.task and a.task != make(name).reset(8)[1]["task"]


def test_same_state_worded_differently():
    """Two conversations that reach the same true state by differently worded questions: equal state keys,
    different observations (what similarity grouping must see through)."""
    seen = {}
    for q in ("What day?", "Which day works for you?", "On what date?", "When do you want to come?", "day?"):
        env = make("dialogue-booking")
        env.reset(3)
        obs, _, _, info = env.step(q)
        seen[obs] = info["state_key"]
    assert len(set(seen.values())) == 1 and len(seen) >= 3


def test_booking_rewards_and_penalties():
    env = make("dialogue-booking")
    env.reset(5)
    bad = next(r for r in env.db if "price" in env.violations(r) or "day" in env.violations(r))
    slot = "price" if "price" in env.violations(bad) else "day"
    # Offered before the constraint was said: rejected, the constraint revealed, no penalty beyond the turn cost.
    obs, reward, done, info = env.step(f"how about {bad.name}?")
    assert not done and reward == pytest.approx(-env.turn_penalty) and slot in info["state_key"][1]
    # Offered again after it was said: the offer penalty too.
    obs, reward, done, info = env.step(f"maybe {bad.name} then")
    assert reward == pytest.approx(-env.turn_penalty - env.offer_penalty) and info["violated"]
    # Chit-chat: invalid, zero reward, state unchanged.
    key = info["state_key"]
    obs, reward, done, info = env.step("hmm")
    assert (info["action_valid"], reward, info["state_key"]) == (False, 0.0, key)


def test_booking_needs_hard_constraints_and_scores_area():
    env = make("dialogue-booking")
    _, info = run(env, lambda e: e.oracle_action(), 11)
    assert info["won"] and info["score"] == 1.0 and not env.violations(next(r for r in env.db if r.name == info["booked"]))
    # Booking straight away without asking: won only if the option happens to meet every hard constraint.
    for seed in range(20):
        env.reset(seed)
        r = env.db[0]
        _, reward, done, info = env.step(f"book {r.name}")
        assert info["won"] == (not env.violations(r))
        if info["won"]:
            assert info["score"] == (1.0 if r.area == env.goal["area"] else 1.0 - env.area_penalty)


def test_guess_scores_fewer_turns_higher():
    env = make("dialogue-guess")
    env.reset(2)
    obs, reward, done, info = env.step(f"is it the {env.secret}?")
    assert done and info["won"] and reward == 1.0
    env.reset(2)
    wrong = next(n for n in env.candidates if n != env.secret)
    obs, reward, done, info = env.step(f"{wrong}?")
    assert not done and reward == 0.0 and info["state_key"][2] == (wrong,)
    obs, reward, done, info = env.step(env.secret)
    assert info["won"] and reward == pytest.approx(0.9)


@pytest.mark.parametrize("name", ENVS)
def test_bad_input_never_crashes_and_turn_cap_ends(name):
    env = make(name, max_turns=4)
    env.reset(0)
    for action in ("", "x" * 100_000, "\x00\udcff ünïcode ☃", "   "):
        obs, reward, done, info = env.step(action)
        assert isinstance(obs, str) and info["action_valid"] is False
    assert done and info["gave_up"] == "turn limit" and not info["won"]
    env.reset(0)
    _, _, _, info = env.step("y" * 5000)
    assert info["truncated"] is True
    with pytest.raises(RuntimeError):
        make(name).step("hello")


def test_unknown_user_and_missing_url_are_one_line_errors():
    with pytest.raises(ValueError, match="env.user must be one of"):
        make("dialogue-guess", user="gpt")
    with pytest.raises(ValueError, match="user_base_url"):
        make("dialogue-booking", user="openai:m")


def test_a_person_can_play():
    env = make("dialogue-guess")
    env.reset(4)
    answer = env.secret
    lines = iter(["what kind of animal?", f"the {answer}"])
    out = []
    res = play(make("dialogue-guess"), 4, input_fn=lambda _: next(lines), print_fn=lambda *a: out.append(a))
    assert res.won and res.steps == 2 and any("Animals:" in str(a) for a in out)


@pytest.mark.parametrize(("preset", "name"), [("dialogue-guess", "dialogue-guess"), ("dialogue-booking", "dialogue-booking")])
def test_tiny_presets_make_every_option_and_slot_one_token(preset, name):
    """The tiny model must be able to emit each intent: every option name and at least one keyword per slot is a
    single token of the vocabulary the preset builds."""
    yaml = pytest.importorskip("yaml")
    from gigpo.models.tokenizer import tiny_tokenizer
    from gigpo.train.config.presets import CONFIG_DIR

    cfg = yaml.safe_load((CONFIG_DIR / f"{preset}.yaml").read_text())
    tiny = cfg["model"]["tiny"]
    tok = tiny_tokenizer(tuple(tiny["extra_words"]), tiny["english_words"])
    module = __import__(f"gigpo.envs.dialogue.{name.split('-')[1]}", fromlist=["SLOT_WORDS"])
    names = list(module.CATALOG) if name == "dialogue-guess" else list(module.NAMES) + ["book"]
    one_token = lambda w: len(tok(w, add_special_tokens=False)["input_ids"]) == 1  # noqa: E731
    assert all(one_token(w) for w in names), [w for w in names if not one_token(w)]
    for slot, keys in module.SLOT_WORDS.items():
        assert any(one_token(k) for k in keys), slot
