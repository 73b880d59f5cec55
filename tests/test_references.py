"""Reference resolution (seed 004), English and German, on real Memory sessions.

Each conversation is stored through Memory (SQLite under tmp_path); the tests
check which earlier message every reference resolves to, the "[Context: ...]"
text, and the numbered clarification when a reference is ambiguous.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from memlane import Memory
from memlane.errors import InvalidInputError
from memlane.eval.locomo_data import load_conversation
from memlane.models import Message
from memlane.state.references import detect_references, resolve


def _ids(mem: Memory, sid: str) -> list[int]:
    return [m.id for m in mem.load_session(sid) if m.id is not None]


@pytest.fixture
def shell_de(mem: Memory) -> tuple[Memory, str, list[int]]:
    """Seed 004's Linux helper in German: a useradd answer, then a reboot answer."""
    sid = mem.create_session(user_id="max")
    mem.store_interaction(
        "Wie lege ich einen neuen Benutzer an?",
        "Mit dem Befehl `sudo useradd -m max` legst du den Benutzer max an.",
        session_id=sid,
    )
    mem.store_interaction(
        "Und wie starte ich das System neu?",
        "Das System startest du mit `sudo reboot` neu.",
        session_id=sid,
    )
    return mem, sid, _ids(mem, sid)


# ---------------------------------------------------------------- the seed's examples


def test_seed_german_ambiguous_reference_asks_with_numbered_options(
    shell_de: tuple[Memory, str, list[int]],
) -> None:
    mem, sid, _ = shell_de
    res = mem.resolve_references("Mach das nochmal", sid)
    assert res.language == "de"
    assert res.needs_clarification
    assert res.clarification == (
        "Ich bin mir nicht sicher, worauf sich 'das' bezieht. Meinten Sie:\n"
        "1. Den Befehl `sudo reboot` ausführen\n"
        "2. Den Befehl `sudo useradd -m max` ausführen\n"
        "3. Etwas anderes?"
    )
    assert res.options == [
        "Den Befehl `sudo reboot` ausführen",
        "Den Befehl `sudo useradd -m max` ausführen",
    ]
    assert res.resolved_query == "Mach das nochmal"  # no guess
    assert res.references[0].ambiguous and res.references[0].target is None
    assert res.confidence < 0.7


def test_words_in_the_query_break_the_tie(shell_de: tuple[Memory, str, list[int]]) -> None:
    mem, sid, ids = shell_de
    res = mem.resolve_references("Starte das nochmal neu", sid)
    ref = res.references[0]
    assert (ref.text, ref.kind, ref.target, ref.message_id) == (
        "das", "pronoun", "sudo reboot", ids[3]
    )
    assert res.resolved_query == (
        "Starte das nochmal neu [Context: 'das' refers to the command `sudo reboot`]"
    )
    assert res.clarification is None and res.confidence >= 0.7

    res = mem.resolve_references("Führe das useradd noch einmal aus", sid)
    assert res.references[0].message_id == ids[1]


def test_seed_suggestion_example_and_store_interaction_keeps_resolved_query(
    mem: Memory,
) -> None:
    sid = mem.create_session(user_id="default_user")
    mem.store_interaction(
        "Ich brauche einen Account für Max.",
        "Ich schlage vor, mit `sudo useradd -m max` einen neuen Benutzer anzulegen.",
        session_id=sid,
    )
    suggestion_id = _ids(mem, sid)[1]
    res = mem.resolve_references("ja setze deinen vorschlag um!", sid)
    assert res.resolved_query == (
        "ja setze deinen vorschlag um! [Context: Previous suggestion was: Ich schlage vor, "
        "mit `sudo useradd -m max` einen neuen Benutzer anzulegen.]"
    )
    assert res.references_resolved == ["deinen vorschlag"]
    assert {r.message_id for r in res.references} == {suggestion_id}
    assert [r.kind for r in res.references] == ["confirmation", "reference"]
    assert res.confidence >= 0.9

    turn_id = mem.store_interaction(
        "ja setze deinen vorschlag um!",
        "I'll implement the user account creation as suggested...",
        {"model_used": "llama3.2:3b"},
        session_id=sid,
        resolve=True,
    )
    turn = next(t for t in mem.list_turns(sid) if t.turn_id == turn_id)
    assert turn.user_message.content == "ja setze deinen vorschlag um!"  # original kept
    assert turn.resolved_query == res.resolved_query
    assert turn.context_used is True
    assert turn.metadata["references_resolved"] == ["deinen vorschlag"]
    assert turn.model_used == "llama3.2:3b"
    # Without references nothing is added, and a caller's own resolved_query wins.
    plain = mem.store_interaction("Danke!", "Gern.", session_id=sid, resolve=True)
    assert next(t for t in mem.list_turns(sid) if t.turn_id == plain).resolved_query == "Danke!"
    own = mem.store_interaction(
        "ja", "ok", {"resolved_query": "mine"}, session_id=sid, resolve=True
    )
    assert next(t for t in mem.list_turns(sid) if t.turn_id == own).resolved_query == "mine"


# ---------------------------------------------------------------- English


@pytest.fixture
def nginx_en(mem: Memory) -> tuple[Memory, str, list[int]]:
    sid = mem.create_session(user_id="ana")
    mem.store_interaction(
        "My nginx server returns 502 errors.",
        "You could restart it with `sudo systemctl restart nginx`.",
        session_id=sid,
    )
    mem.store_interaction(
        "And how do I see the logs?",
        "Run `journalctl -u nginx -n 50` to see the last 50 lines.",
        session_id=sid,
    )
    return mem, sid, _ids(mem, sid)


def test_english_ambiguous_pronoun_gets_english_options(
    nginx_en: tuple[Memory, str, list[int]],
) -> None:
    mem, sid, _ = nginx_en
    res = mem.resolve_references("Do it again", sid)
    assert res.language == "en"
    assert res.clarification == (
        "I'm not sure what 'it' refers to. Did you mean:\n"
        "1. Run `journalctl -u nginx -n 50`\n"
        "2. Run `sudo systemctl restart nginx`\n"
        "3. Something else?"
    )
    # The query's language picks the clarification's, whatever the session spoke.
    res_de = mem.resolve_references("Mach das bitte nochmal", sid)
    assert res_de.clarification is not None
    assert res_de.clarification.startswith("Ich bin mir nicht sicher, worauf sich 'das' bezieht.")
    assert "Den Befehl `sudo systemctl restart nginx` ausführen" in res_de.clarification


@pytest.mark.parametrize(
    ("query", "kind", "index", "context"),
    [
        ("restart it again", "pronoun", 1, "'it' refers to the command `sudo systemctl restart nginx`"),
        ("your suggestion sounds risky", "reference", 3,
         "Previous suggestion was: Run `journalctl -u nginx -n 50` to see the last 50 lines."),
        ("the previous answer was unclear", "reference", 3,
         "Previous answer was: Run `journalctl -u nginx -n 50` to see the last 50 lines."),
        ("what you said about the logs", "reference", 3,
         "Previous answer was: Run `journalctl -u nginx -n 50` to see the last 50 lines."),
        ("that's wrong", "negation", 3,
         "User rejects the previous suggestion: Run `journalctl -u nginx -n 50` to see the "
         "last 50 lines."),
        ("no", "negation", 3, None),
        ("ok do it", "confirmation", 3, None),
        ("proceed", "confirmation", 3,
         "Continue with: Run `journalctl -u nginx -n 50` to see the last 50 lines."),
        ("continue please", "confirmation", 3, None),
        ("What does that command do?", "reference", 3,
         "'that command' is the command `journalctl -u nginx -n 50`"),
    ],
)
def test_english_references_resolve_to_the_right_message(
    nginx_en: tuple[Memory, str, list[int]],
    query: str, kind: str, index: int, context: str | None,
) -> None:
    mem, sid, ids = nginx_en
    res = mem.resolve_references(query, sid)
    assert [r.kind for r in res.references] == [kind]
    ref = res.references[0]
    assert ref.message_id == ids[index]
    assert ref.confidence >= 0.7
    assert res.clarification is None
    assert res.resolved_query.startswith(query + " [Context: ")
    if context is not None:
        assert res.resolved_query == f"{query} [Context: {context}]"


def test_offer_confirmation_and_yes_do_it(mem: Memory) -> None:
    sid = mem.create_session()
    mem.store_interaction("The disk is full.", "Shall I delete the old snapshots?", session_id=sid)
    offer = _ids(mem, sid)[1]
    for query in ("yes", "yes, do it", "ja", "Ja, mach das", "go ahead", "do it"):
        res = mem.resolve_references(query, sid)
        assert res.clarification is None, query
        assert {r.message_id for r in res.references} == {offer}, query
        assert res.resolved_query.endswith(
            "[Context: User confirms the previous offer: Shall I delete the old snapshots?]"
        ) or "refers to: Shall I delete the old snapshots?" in res.resolved_query, query
    res = mem.resolve_references("nein", sid)
    assert res.references[0].kind == "negation" and res.references[0].message_id == offer
    res = mem.resolve_references("No problem, thanks", sid)
    assert res.references == [] and res.resolved_query == "No problem, thanks"


# ---------------------------------------------------------------- lists, jobs, plurals


def test_selections_and_plurals_point_into_the_last_list(mem: Memory) -> None:
    sid = mem.create_session()
    mem.store_interaction(
        "Which backup tools are there?",
        "There are a few good ones:\n1. restic\n2. borg\n3. rsnapshot\nWhich do you prefer?",
        session_id=sid,
    )
    listing = _ids(mem, sid)[1]
    cases = {
        "the second one": "borg", "2": "borg", "Nummer 3": "rsnapshot", "die erste": "restic",
        "tell me more about the last option": "rsnapshot", "option 1 please": "restic",
    }
    for query, item in cases.items():
        res = mem.resolve_references(query, sid)
        assert [(r.kind, r.target, r.message_id) for r in res.references] == [
            ("selection", item, listing)
        ], query
    res = mem.resolve_references("compare them", sid)
    assert res.references[0].target == "restic; borg; rsnapshot"
    res = mem.resolve_references("Install it", sid)
    assert res.clarification == (
        "I'm not sure what 'it' refers to. Did you mean:\n1. restic\n2. borg\n3. rsnapshot\n"
        "4. Something else?"
    )


def test_task_references_use_job_ids_and_ask_between_two_jobs(mem: Memory) -> None:
    sid = mem.create_session()
    mem.store_interaction(
        "Start the nightly backup.", "Started job-1 for the backup.",
        {"job_refs": ["job-1"]}, session_id=sid,
    )
    res = mem.resolve_references("Is that task finished?", sid)
    assert res.references[0].target == "job-1"
    assert res.resolved_query == "Is that task finished? [Context: 'that task' is job-1]"
    mem.store_interaction("Also reindex.", "Started job-2 (reindex) next to job-1.", session_id=sid)
    res = mem.resolve_references("cancel the job", sid)
    assert res.clarification == (
        "I'm not sure what 'the job' refers to. Did you mean:\n1. job-2\n2. job-1\n"
        "3. Something else?"
    )
    res = mem.resolve_references("Wie weit ist der Auftrag?", sid)
    assert res.language == "de" and res.clarification is not None
    assert res.clarification.startswith("Ich bin mir nicht sicher, worauf sich 'der Auftrag'")


def test_demonstrative_noun_phrase_finds_the_message_that_named_it(mem: Memory) -> None:
    sid = mem.create_session()
    mem.add(sid, "I keep my notes in /home/ana/todo.txt and the budget in a spreadsheet.")
    mem.add(sid, "Got it.", role="assistant")
    mem.add(sid, "Kannst du mir helfen, die Datei config.yaml zu finden?")
    mem.add(sid, "Die Datei liegt unter /etc/app/config.yaml.", role="assistant")
    ids = _ids(mem, sid)
    res = mem.resolve_references("Can you open that spreadsheet?", sid)
    assert res.references[0].message_id == ids[0]
    res = mem.resolve_references("Öffne diese Datei", sid)
    assert res.references[0].message_id == ids[3]
    assert res.language == "de"


# ---------------------------------------------------------------- no false alarms


@pytest.mark.parametrize(
    "query",
    [
        "It is raining today",
        "I think that we should go",
        "Es gibt ein Problem mit dem Server",
        "What is nginx and how do I install it?",
        "Wie kann ich das System neu starten?",
        "How's it going?",
        "Wie geht es dir?",
        "Is it possible to mount a disk?",
        "Anything that stands out?",
        "Is job-1 done?",
        "No worries",
        "How long does it take to get from the airport to the city?",
        "It doesn't matter, I'll buy one.",
        "Wie lange dauert es vom Flughafen in die Stadt?",
        "Es fällt mir schwer, jeden Tag zu üben.",
        "Es dauert noch drei Wochen, bis alles gepackt ist.",
        "Es kommt darauf an, wie viel Zeit ich habe.",
        "Es lohnt sich, früh loszugehen.",
        "It is worth starting early.",
    ],
)
def test_no_reference_no_change(query: str) -> None:
    history = [
        Message(role="user", content="hi", id=1),
        Message(role="assistant", content="Use `ls -la` to list files.", id=2),
    ]
    res = resolve(query, history)
    assert res.references == [], [r.text for r in res.references]
    assert res.resolved_query == query and res.confidence == 1.0 and not res.needs_clarification


def test_nothing_to_point_at_and_bad_input(mem: Memory) -> None:
    sid = mem.create_session()
    res = mem.resolve_references("delete it", sid)
    assert res.clarification == "I'm not sure what 'it' refers to. Could you say what you mean?"
    assert res.options == []
    res = mem.resolve_references("lösche es", "not-created-yet")
    assert res.clarification == (
        "Ich bin mir nicht sicher, worauf sich 'es' bezieht. Können Sie das genauer sagen?"
    )
    with pytest.raises(InvalidInputError, match="query"):
        mem.resolve_references("   ", sid)
    with pytest.raises(InvalidInputError, match="session_id"):
        mem.resolve_references("it", "")


def test_short_replies_take_the_conversation_language() -> None:
    history = [
        Message(role="user", content="Welche Editoren gibt es?", id=1),
        Message(role="assistant", content="Zum Beispiel:\n- vim\n- nano", id=2),
    ]
    res = resolve("das", history, language="de")
    assert res.language == "de"
    assert res.clarification is not None and res.clarification.startswith("Ich bin mir")
    assert resolve("it", history, language="de").language == "en"  # the query says English


def test_detection_spans() -> None:
    query = "ja setze deinen vorschlag um!"
    found = [(r.kind, query[r.start:r.end]) for r in detect_references(query)]
    assert found == [("confirmation", "ja"), ("reference", "deinen vorschlag")]
    query = "No, that's wrong: use the second option instead of what you said"
    assert [(r.kind, r.text) for r in detect_references(query)] == [
        ("negation", "No"), ("negation", "that's wrong"), ("selection", "the second option"),
        ("reference", "what you said"),
    ]


def test_result_serialises() -> None:
    history = [Message(role="assistant", content="I suggest `apt upgrade`.", id=7)]
    res = resolve("yes, your suggestion", history)
    data = res.to_dict()
    assert data["references"][1]["message_id"] == 7
    meta = res.to_metadata()
    assert meta["context_used"] is True and meta["references_resolved"] == ["your suggestion"]


# ---------------------------------------------------------------- LoCoMo


def test_locomo_noun_phrases_resolve_to_a_message_that_names_them(
    locomo_files: list[Path],
) -> None:
    checked = 0
    for path in locomo_files[:2]:
        conv = load_conversation(path)
        for session in conv.sessions[:3]:
            msgs = conv.session_messages(session, session_id="x")
            for i, msg in enumerate(msgs):
                msg.id = i + 1
            for i in range(1, len(msgs)):
                res = resolve(msgs[i].content, msgs[max(0, i - 12): i])
                for ref in res.references:
                    if ref.kind != "entity" or ref.message_id is None:
                        continue
                    noun = ref.text.split()[-1].lower()
                    earlier = msgs[ref.message_id - 1]
                    assert ref.message_id <= i, "only earlier messages"
                    assert noun[:5] in earlier.content.lower(), (ref.text, earlier.content)
                    checked += 1
    assert checked >= 5
    # One concrete case: "that shelter" is the dog shelter Tobias named two messages earlier,
    # not Maren's photo of it in between (which never says "shelter").
    conv = load_conversation(locomo_files[0])
    msgs = conv.session_messages(conv.session(2), session_id="y")
    for i, msg in enumerate(msgs):
        msg.id = i + 1
    i = next(i for i, m in enumerate(msgs) if "that shelter looks great" in m.content)
    ref = resolve(msgs[i].content, msgs[:i]).references[0]
    assert ref.text == "that shelter" and ref.message_id == i - 1
    assert "dog shelters" in msgs[(ref.message_id or 0) - 1].content


def _turn(user: str, assistant: str) -> list[Message]:
    return [Message(role="user", content=user, id=1), Message(role="assistant", content=assistant, id=2)]


def test_german_demonstratives_der_den_dem_agree_with_the_noun() -> None:
    history = _turn("Welchen Rechner nehme ich?", "Ich empfehle den Raspberry Pi 5 und eine schnelle SD-Karte.")
    res = resolve("Reicht der auch für Nextcloud?", history)
    assert "Raspberry Pi 5" in res.resolved_query  # der (m) -> den Raspberry Pi 5, not die SD-Karte
    # before a noun or an adjective with its ending, der/den/dem are articles, not references
    for query in ("Ist der Raspberry schnell genug?", "Reicht der neue Rechner?", "Nimm den zweiten Weg"):
        assert not [r for r in detect_references(query) if r.kind == "pronoun"], query
    # a name after the noun is capitalised, a number or file-like; the verb after it is not
    history = _turn("Und die Logs?", "Der Fehler sagt: Port belegt. Das Skript backup.sh räumt auf.")
    assert "backup.sh" in resolve("Wie starte ich es?", history).resolved_query


def test_a_german_ordinal_without_its_noun_selects_from_the_list() -> None:
    history = _turn("Welche Dienste laufen?", "Diese Dienste laufen:\n- nginx\n- postgresql\n- redis")
    assert "postgresql" in resolve("Läuft der zweite fehlerfrei?", history).resolved_query
    assert "nginx" in resolve("Was ist mit dem ersten los?", history).resolved_query


@pytest.mark.parametrize(("query", "language"), [("fix it", "en"), ("How do I free it?", "en"),
                                                 ("Reparier das", "de"), ("Wie gebe ich ihn frei?", "de")])
def test_a_repair_verb_points_at_the_reported_fault_not_the_command(query: str, language: str) -> None:
    text = {"en": "Check its logs with `docker logs web`. The error says the port 8080 is already in use.",
            "de": "Schau dir die Logs mit `docker logs web` an. Der Fehler sagt, dass Port 8080 schon belegt ist."}
    res = resolve(query, _turn("My container keeps crashing.", text[language]))
    assert "8080" in res.resolved_query and "docker logs" not in res.resolved_query.split("[Context")[1]
    # "run it" is no repair: the command stays the referent
    assert "docker logs web" in resolve("run it again", _turn("Crashing.", text["en"])).resolved_query


@pytest.mark.parametrize("query", [
    "Is it going to rain tomorrow?", "Wird es morgen regnen?", "Wie viel Uhr ist es in Tokio?",
    "Es ist schon spät, ich mache morgen weiter.",
])
def test_weather_and_clock_it_es_are_no_references(query: str) -> None:
    res = resolve(query, _turn("Installier htop.", "Erledigt: `sudo apt install htop` ist durchgelaufen."))
    assert res.references == [] and res.resolved_query == query


def test_ok_to_a_list_of_commands_asks_which_and_an_offer_names_its_command() -> None:
    options = "Two options:\n1. Restart it with `sudo systemctl restart nginx`\n2. Clear the cache with `sudo rm -rf /var/cache/nginx/*`"
    res = resolve("ok do that", _turn("My web server is slow.", options))
    assert res.needs_clarification and any("restart nginx" in o for o in res.options) \
        and any("rm -rf" in o for o in res.options)
    assert "restart nginx" in resolve("ok, restart it", _turn("Slow.", options)).resolved_query
    # a list that only informs is confirmed, not turned into a choice
    info = resolve("ok", _turn("Which containers run?", "These run:\n- web\n- db"))
    assert not info.needs_clarification
    offer = _turn("Is my disk encrypted?", "No. I can encrypt it with `sudo ecryptfs-migrate-home -u max`. Shall I run it?")
    assert "ecryptfs-migrate-home" in resolve("yes please", offer).resolved_query


@pytest.mark.parametrize("query", [
    "It's getting dark already, I'll continue tomorrow.", "It'll be pitch-dark soon.",
    "It has been such a long week.", "Es wird schon dunkel, ich mache morgen weiter.",
    "Es ist eiskalt in meinem Büro.", "Ist es draußen noch hell?", "Bald wird es Nacht.",
])
def test_light_temperature_and_the_hour_are_states_not_references(query: str) -> None:
    res = resolve(query, _turn("Ich richte mein Backup-Skript ein.", "Teste auch die Wiederherstellung."))
    assert res.resolved_query == query and not res.needs_clarification


def test_es_with_a_predicate_that_is_no_state_still_refers_back() -> None:
    turns = _turn("Ich suche ein Backup-Programm.", "Nimm Borg: das Programm dedupliziert die Sicherungen.")
    assert "Borg" in resolve("Ist es schnell?", turns).resolved_query


def _two_topics(first_q: str, first_a: str, then_q: str, then_a: str) -> list[Message]:
    return [*_turn(first_q, first_a), *[replace(m, id=(m.id or 0) + 2) for m in _turn(then_q, then_a)]]


@pytest.mark.parametrize("query", [
    "What did you say about cron?", "what was that again about cron?", "Was hast du zu cron gesagt?",
    "About cron: which line was it?", "Zum Cron-Job: welche Zeile war das?",
])
def test_a_topic_binds_to_the_turn_about_it_not_the_last_answer(query: str) -> None:
    history = _two_topics("How do I run a job every night?", "Add `0 2 * * * backup.sh` with `crontab -e`.",
                          "How do I read service logs?", "Use `journalctl -u web -f`.")
    res = resolve(query, history)
    note = res.resolved_query[len(query):]
    assert "crontab" in note and "journalctl" not in note


def test_a_fronted_topic_no_turn_is_about_adds_nothing() -> None:
    history = _turn("How do I read service logs?", "Use `journalctl -u web -f`.")
    query = "About Python: which version should I install?"
    assert resolve(query, history).resolved_query == query


def test_what_the_assistant_meant_points_back_like_what_it_said() -> None:
    history = _two_topics("Mein Laptop wird zu heiß.", "Reinige die Lüfter und prüfe die Werte mit `sensors`.",
                          "Und das WLAN?", "Nutze das 5-GHz-Band.")
    res = resolve("Was meintest du mit den Lüftern?", history)
    assert "sensors" in res.resolved_query


def test_a_german_pronoun_prefers_the_object_to_a_noun_in_a_prepositional_phrase() -> None:
    history = _turn("Womit werte ich Messdaten aus?", "Ich empfehle die Bibliothek Pandas für die Auswertung.")
    assert "'sie' refers to Bibliothek Pandas" in resolve("Wie installiere ich sie?", history).resolved_query


def test_a_turn_without_a_command_is_named_with_its_answer() -> None:
    history = _turn("Which containers are unhealthy?", "Two are unhealthy: `web-frontend` and `queue-worker`.")
    res = resolve("Why are they failing?", history)
    assert "web-frontend" in res.resolved_query and "queue-worker" in res.resolved_query


def test_then_and_damals_point_to_a_year() -> None:
    assert "2015" in resolve("Which laptops were popular then?",
                             _turn("I started my first job in 2015.", "Congratulations!")).resolved_query
    assert "2019" in resolve("Was war damals beliebt?",
                             _turn("Ich habe 2019 mit Linux angefangen.", "Schön.")).resolved_query


def test_after_an_auxiliary_that_is_the_subject_unless_another_word_is_the_verb() -> None:
    turns = _turn("Summarize the error.", "The job failed because the registry token expired.")
    assert "token" in resolve("Why did that happen?", turns).resolved_query
    assert [r.text for r in detect_references("Did that fix the problem?")] == ["that"]
    assert [r.text for r in detect_references("Does that file exist?")] == ["that file"]


def test_is_this_with_a_predicate_refers_back() -> None:
    turns = _turn("Speed up git status?", "Enable the monitor with `git config core.fsmonitor true`.")
    assert "fsmonitor" in resolve("Is this safe on a shared repo?", turns).resolved_query


def test_a_tool_call_is_named_with_its_result() -> None:
    history = [
        Message(role="user", content="How much space is free on the NAS?", id=1),
        Message(role="assistant", content="", id=2, tool_calls=[
            {"id": "c1", "type": "function", "function": {"name": "disk_free", "arguments": "{}"}}]),
        Message(role="tool", content="/mnt/nas free 200G", id=3),
    ]
    res = resolve("Reicht das für das Videoarchiv?", history, language="de")
    assert "disk_free" in res.resolved_query and "200G" in res.resolved_query


@pytest.mark.parametrize("query", ["again, but in Spanish", "Nochmal, aber auf Spanisch"])
def test_again_with_nothing_run_repeats_the_last_request(query: str) -> None:
    res = resolve(query, _turn("Translate 'good morning' into Italian.", "'Buongiorno'."))
    assert "good morning" in res.resolved_query


@pytest.mark.parametrize(("query", "item"), [("the last one", "Iosevka"), ("the second one", "Fira Code"),
                                             ("Die letzte gefällt mir", "Iosevka")])
def test_ordinals_pick_from_a_list_run_into_a_sentence(query: str, item: str) -> None:
    res = resolve(query, _turn("Which font?", "Good choices: JetBrains Mono, Fira Code or Iosevka."))
    assert item in res.resolved_query


def test_a_yes_to_an_elliptical_offer_names_what_was_offered() -> None:
    res = resolve("sounds good", _turn("Our keys leaked.", "I can rotate the API keys now. Want me to?"))
    assert "rotate the API keys" in res.resolved_query


@pytest.mark.parametrize(("query", "answer", "ask"), [
    ("Install it.", "Firefox for browsing and Thunderbird for mail.", "Did you mean"),
    ("Wie richte ich das ein?", "Obsidian speichert Markdown-Dateien; Joplin synchronisiert verschlüsselt.",
     "Meinten Sie"),
])
def test_two_names_side_by_side_in_prose_are_a_choice_to_ask_about(query: str, answer: str, ask: str) -> None:
    res = resolve(query, _turn("Which apps?", answer))
    assert res.needs_clarification and ask in (res.clarification or "")
    assert len(res.options) == 2 and "Something else" not in " ".join(res.options)
    # one name alone, or a query that names one of them, is no choice
    assert not resolve(query, _turn("Which browser?", "Firefox is fast and private.")).needs_clarification
    first = answer.split()[0]
    assert first in resolve(f"Install it, the {first} one.", _turn("Which apps?", answer)).resolved_query


@pytest.mark.parametrize(("answer", "query", "language", "options"), [
    ("You could go to the climbing hall or visit the farmers' market.", "Let's do it", "en",
     ["climbing hall", "market"]),
    ("The MacBook Air is light, or the ThinkPad X1 if you want Linux.", "order it for me", "en",
     ["MacBook", "ThinkPad"]),
    ("Entweder Kartoffelsuppe oder Spaghetti mit Tomatensoße.", "Koch das", "de", ["Kartoffelsuppe", "Spaghetti"]),
    ("Zwei Möglichkeiten:\n1. Die Bibliothek festsetzen\n2. Den Code anpassen", "Mach das", "de",
     ["Bibliothek", "Code"]),
])
def test_a_bare_reply_to_alternatives_asks_in_the_users_language(
        answer: str, query: str, language: str, options: list[str]) -> None:
    history = [Message(role="user", content="Any idea?", id=1), Message(role="assistant", content=answer, id=2)]
    res = resolve(query, history, language=language)
    assert res.needs_clarification and len(res.options) == 2, res
    assert all(any(o in opt for opt in res.options) for o in options), res.options
    assert ("Meinten Sie" in (res.clarification or "")) == (language == "de")


def test_a_word_of_the_query_picks_one_alternative_and_a_recommendation_is_no_choice() -> None:
    history = [Message(role="user", content="Dinner?", id=1),
               Message(role="assistant", content="Either a Thai green curry or homemade pizza.", id=2)]
    res = resolve("ok, make the pizza then", history)
    assert not res.needs_clarification and "pizza" in res.resolved_query.split("[Context:")[1]
    history[1] = Message(role="assistant", content="Oat milk or regular? I'd add oat milk, you liked it.", id=2)
    res = resolve("yes, do that", history)
    assert not res.needs_clarification and "oat milk" in res.resolved_query.split("[Context:")[1].lower()


def test_there_binds_the_newest_place_and_is_there_asks_about_existence() -> None:
    alps = [Message(role="user", content="I want to go hiking in the Alps.", id=1),
            Message(role="assistant", content="Try the area around Berchtesgaden: marked trails.", id=2)]
    assert "refers to Berchtesgaden" in resolve("How do I get there by train?", alps).resolved_query
    lisbon = [Message(role="user", content="Where should we go in May?", id=1),
              Message(role="assistant", content="Lisbon is lovely in spring: mild weather.", id=2)]
    assert "refers to Lisbon" in resolve("Where should we stay there?", lisbon).resolved_query
    assert "refers to Lisbon" in resolve("Wie komme ich dorthin?", lisbon, language="de").resolved_query
    res = resolve("Is there a direct flight?", lisbon)
    assert res.references == [] and res.resolved_query == "Is there a direct flight?"


def test_an_additive_fragment_repeats_the_last_request_but_a_reply_about_people_does_not() -> None:
    lint = [Message(role="user", content="Run the linter on the frontend.", id=1),
            Message(role="assistant", content="I ran `npm run lint` in frontend/: no problems.", id=2)]
    assert "npm run lint" in resolve("now the backend too", lint).resolved_query
    assert "npm run lint" in resolve("und das Backend auch", lint, language="de").resolved_query
    bye = [Message(role="user", content="Thanks, bye!", id=1),
           Message(role="assistant", content="Have a nice evening!", id=2)]
    for query in ("and you too", "und dir auch"):
        res = resolve(query, bye)
        assert res.references == [] and not res.needs_clarification, query


def test_the_result_is_what_the_command_the_assistant_ran_reported() -> None:
    ran = [Message(role="user", content="Wie viele Zeilen hat meine CSV-Datei?", id=1),
           Message(role="assistant", content="Ich habe `wc -l kunden.csv` ausgeführt: 12.408 Zeilen.", id=2)]
    res = resolve("Ist im Ergebnis die Kopfzeile mitgezählt?", ran, language="de")
    assert "`wc -l kunden.csv`" in res.resolved_query and "12.408" in res.resolved_query
    for query in ("What was the result of the vote?", "The result was great, thanks"):
        res = resolve(query, [*ran[:1], Message(role="assistant", content="Glad to help!", id=2)])
        assert res.resolved_query == query and not res.needs_clarification, query


def test_a_topic_phrase_after_that_and_an_adverb_before_the_verb() -> None:
    eggs = [Message(role="user", content="How long should I boil eggs?", id=1),
            Message(role="assistant", content="Soft-boiled: 6 minutes. Hard-boiled: 10 minutes.", id=2),
            Message(role="user", content="What about screen time for kids?", id=3),
            Message(role="assistant", content="No screens an hour before bed.", id=4)]
    assert "6 minutes" in resolve("what was that about eggs?", eggs).resolved_query
    flies = [Message(role="user", content="How do I get rid of fruit flies?", id=1),
             Message(role="assistant", content="Put a bowl of apple cider vinegar next to the fruit.", id=2)]
    assert "vinegar" in resolve("Does that really work?", flies).resolved_query
    roast = [Message(role="user", content="Wie lange muss ein Braten ruhen?", id=1),
             Message(role="assistant", content="Lass den Braten zehn Minuten ruhen.", id=2),
             Message(role="user", content="Und die Soße?", id=3),
             Message(role="assistant", content="Den Bratensatz mit Brühe ablöschen.", id=4)]
    assert "zehn Minuten" in resolve("Was hattest du zum Braten gesagt?", roast, language="de").resolved_query


def test_a_german_ordinal_with_the_noun_of_the_list_selects_from_it() -> None:
    ideas = [Message(role="user", content="Was machen wir am Sonntag?", id=1),
             Message(role="assistant", content="Drei Ideen:\n1. Zoo\n2. Schwimmbad\n3. Picknick im Park", id=2)]
    assert "Picknick" in resolve("die dritte Idee gefällt mir", ideas, language="de").resolved_query
    res = resolve("Der erste Schultag war schön", ideas, language="de")
    assert res.resolved_query == "Der erste Schultag war schön" and not res.needs_clarification


@pytest.mark.parametrize(("answer", "query", "language", "name"), [
    ("Ask Priya from next door; she loves plants.", "Is she free on Monday?", "en", "Priya"),
    ("Call Mike Jensen, he is a plumber.", "Is he expensive?", "en", "Mike Jensen"),
    ("Frag Herrn Schulz, der hat einen Transporter.", "Wann hat er Zeit?", "de", "Schulz"),
])
def test_a_person_pronoun_binds_the_person_the_answer_named_not_its_sentence(
        answer: str, query: str, language: str, name: str) -> None:
    history = [Message(role="user", content="Who can help?", id=1), Message(role="assistant", content=answer, id=2)]
    assert f"refers to {name} " in resolve(query, history, language=language).resolved_query
