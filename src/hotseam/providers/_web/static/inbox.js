// The hotseam web inbox. Every model-written string goes through textContent, never HTML.
//
// A card is live (answerable), on hold (its question was withdrawn by a reload or the
// connection is gone: shown in place, not answerable), or gone (a note saying why). A card on
// hold comes back in place when its question does (the same id after a reload; the same
// question after a restart), so nothing jumps; otherwise it says it is no longer asked.
//
// The fleet inbox (`hotseam inbox --journal URL`) serves the same page for many daemons: its
// questions carry `daemon` (who asks, and whether it is up) and `state` ("abandoned": nobody
// owns the question any more; it can only be cleared), and `changed` events update a card in
// place (a daemon went down or came back), keeping whatever was chosen or typed.
"use strict";
(function () {
  const token = new URLSearchParams(location.search).get("token") || "";
  const list = document.getElementById("questions");
  const empty = document.getElementById("empty");
  const status = document.getElementById("status");
  const cards = new Map();   // question id -> card element
  const drafts = new Map();  // fingerprint -> {choice, text}: kept when a question is re-asked
  const NOTE_MS = 4000;      // a note of an ended question stays this long
  const HOLD_MS = 1500;      // a withdrawn question stays on hold this long for a reload to follow
  const RETURN_MS = 3000;    // after reconnecting, a question on hold waits this long to be asked again
  const TITLE = document.title;
  const client = Array.from(crypto.getRandomValues(new Uint8Array(12)),
    (b) => b.toString(16).padStart(2, "0")).join("");  // who this tab is, in answers it sends
  let source = null;
  let retry = 250;
  let connection = "connecting";  // live | connecting | stopped | bad-token

  function el(tag, props, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "text") node.textContent = value;
      else if (key === "class") node.className = value;
      else if (value !== null && value !== undefined && value !== false) node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children || []) if (child) node.appendChild(child);
    return node;
  }

  function fingerprint(q) {
    return JSON.stringify([q.agent && q.agent.id, q.header, q.question, q.options.map((o) => o.label)]);
  }

  function sentence(text) {
    text = String(text || "withdrawn");
    return text.charAt(0).toUpperCase() + text.slice(1) + ".";
  }

  function shown(answer) {
    if (!answer) return "";
    return answer.label !== undefined ? answer.label : "“" + answer.text + "”";
  }

  function held(name) {
    return name ? " Held for " + name + "'s resume." : "";
  }

  // Which daemon asks, for a question of the fleet inbox ("" for a process's own inbox).
  function asker(d) {
    return d.name + " on " + d.host + ", pid " + d.pid + (d.agent ? ", agent " + d.agent : "");
  }

  function setStatus(text, alert) {
    if (status.textContent !== text) status.textContent = text;  // announced once, not per retry
    status.classList.toggle("alert", Boolean(alert));
  }

  // The empty note, the title's count: what is waiting, as far as this page knows.
  function refresh() {
    const waiting = list.querySelectorAll("li.card:not(.gone):not(.abandoned)").length;
    empty.hidden = connection !== "live" || waiting > 0;
    const away = connection === "stopped" || connection === "bad-token";
    document.title = (waiting && !away ? "(" + waiting + ") " : "") + TITLE + (away ? " (not connected)" : "");
  }

  const clock = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit", second: "2-digit" });

  function render(q) {
    const base = "q-" + q.id;
    const who = q.agent ? (q.agent.name || q.agent.id) : "an agent";
    const asked = clock.format(new Date(q.askedAt * 1000));
    const draft = drafts.get(fingerprint(q));
    const controls = [];
    let custom = null;
    q.options.forEach((o, i) => {
      const id = base + "-o" + i;
      const checked = draft ? draft.choice === String(i) : o.recommended;
      controls.push(el("div", { class: "option" }, [
        el("input", { type: "radio", name: base, id: id, value: String(i), checked: checked,
                      "aria-describedby": o.description ? id + "-d" : null }),
        el("label", { for: id }, [
          el("span", { text: o.label }),
          o.recommended ? el("span", { class: "badge", text: "Recommended" }) : null,
          o.description ? el("span", { class: "desc", id: id + "-d", text: o.description }) : null,
        ]),
      ]));
    });
    if (q.allowCustom && q.options.length) {
      const id = base + "-own";
      custom = el("input", { type: "text", id: id + "-text", "aria-label": "Type your own answer", maxlength: "20000",
                             placeholder: "Type your own answer", autocomplete: "off" });
      controls.push(el("div", { class: "option" }, [
        el("input", { type: "radio", name: base, id: id, value: "own", checked: draft && draft.choice === "own" }),
        el("label", { for: id }, [el("span", { text: "Your own answer" }), custom]),
      ]));
      custom.addEventListener("input", () => { document.getElementById(id).checked = true; });
    } else if (!q.options.length) {
      custom = el("textarea", { id: base + "-text", maxlength: "20000", "aria-describedby": base + "-hint" });
      controls.push(el("label", { for: base + "-text", text: "Your answer" }), custom,
                    el("p", { class: "hint", id: base + "-hint", text: "Ctrl+Enter sends." }));
      custom.addEventListener("keydown", (e) => {
        if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
      });
    }
    if (custom && draft) custom.value = draft.text || "";
    const error = el("p", { class: "error", role: "alert" });
    const hold = el("p", { class: "hold", role: "status" });
    const answerButton = el("button", { type: "submit", class: "answer", text: "Answer" });
    const dismissButton = el("button", { type: "button", class: "dismiss", text: "Dismiss" });
    const clearButton = el("button", { type: "button", class: "clear", text: "Clear", hidden: true });
    const fieldset = el("fieldset", {}, [el("legend", { id: base + "-title", text: q.question }), ...controls]);
    const situation = el("p", { class: "situation", role: "status" });
    const form = el("form", { "aria-labelledby": base + "-title", novalidate: true }, [
      fieldset,
      el("div", { class: "actions" }, [answerButton, dismissButton, clearButton]),
      situation,
      hold,
      error,
    ]);
    const daemonState = el("span", { class: "daemon-state" });
    const card = el("li", { class: "card", id: base, "data-id": q.id }, [
      el("p", { class: "meta", text: "Asked by " + who + " at " + asked }),
      q.daemon ? el("p", { class: "daemon" }, [el("span", { text: asker(q.daemon) }), daemonState]) : null,
      q.header ? el("h2", { text: q.header }) : null,
      form,
    ]);
    card.fingerprint = fingerprint(q);
    card.draft = () => {
      const chosen = form.querySelector("input[type=radio]:checked");
      return { choice: chosen ? chosen.value : null, text: custom ? custom.value : "" };
    };
    card.labelOf = (body) => body.option !== undefined ? q.options[body.option].label : "“" + body.text + "”";
    card.enable = (on) => {
      const live = on && !card.abandoned;
      fieldset.disabled = !live;
      answerButton.disabled = dismissButton.disabled = !live || Boolean(card.sending);
      clearButton.disabled = !on || Boolean(card.sending);
    };
    card.holdNote = hold;
    // Who asks and what can be done, from the latest word on the question (in place).
    card.update = (latest) => {
      const d = latest.daemon;
      card.heldFor = d && !d.up ? d.name : null;
      card.abandoned = latest.state === "abandoned";
      card.classList.toggle("down", Boolean(card.heldFor));
      card.classList.toggle("abandoned", card.abandoned);
      if (d) daemonState.textContent = d.up ? " — up" : " — down" + (d.stopped ? " (stopped)" : " (no heartbeat)");
      situation.textContent = card.abandoned
        ? "Nobody owns this question any more: its run was abandoned, and nothing will read an answer. Clear it."
        : card.heldFor ? card.heldFor + " is down: an answer is held for its resume." : "";
      answerButton.hidden = dismissButton.hidden = card.abandoned;
      clearButton.hidden = !card.abandoned;
      card.enable(!card.classList.contains("held"));
    };
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (card.classList.contains("held") || card.abandoned) return;
      const chosen = form.querySelector("input[type=radio]:checked");
      let body;
      if (q.options.length && (!chosen || chosen.value !== "own")) {
        if (!chosen) { error.textContent = "Choose an option."; return; }
        body = { option: Number(chosen.value) };
      } else {
        if (!custom.value.trim()) { error.textContent = "Type an answer first."; custom.focus(); return; }
        body = { text: custom.value };
      }
      send(card, "answer", body, error);
    });
    dismissButton.addEventListener("click", () => send(card, "dismiss", {}, error));
    clearButton.addEventListener("click", () => send(card, "clear", {}, error));
    card.update(q);
    return card;
  }

  async function send(card, action, body, error) {
    error.textContent = "";
    card.sending = action;
    card.enable(false);
    try {
      const response = await fetch("api/questions/" + encodeURIComponent(card.dataset.id) + "/" + action, {
        method: "POST",
        headers: { "content-type": "application/json", "x-hotseam-token": token, "x-hotseam-client": client },
        body: JSON.stringify(body),
        cache: "no-store",
      });
      const data = await response.json().catch(() => ({}));
      if (response.ok) {
        drafts.delete(card.fingerprint);
        finish(card.dataset.id, action === "answer" ? "Answered: " + card.labelOf(body) + "." + held(data.heldFor)
          : action === "clear" ? "Cleared." : "Dismissed.");
        return;
      }
      const failure = data.error || {};
      const message = failure.message || "HTTP " + response.status;
      if (response.status === 409 && failure.code === "NOT_ABANDONED") {
        error.textContent = message;
      } else if (response.status === 409 || response.status === 404) {
        finish(card.dataset.id, failure.code === "ALREADY_ANSWERED"
          ? removedNote({ reason: "answered", client: failure.client, answer: failure.answer,
                          by: failure.by, heldFor: failure.heldFor })
          : "No longer pending: " + message);
        return;
      }
      error.textContent = message;
    } catch (failure) {
      error.textContent = "Could not reach hotseam: " + failure.message;
    }
    card.sending = null;
    card.enable(!card.classList.contains("held"));
  }

  // Who decided a question, when not this tab: another tab of this inbox, another process
  // (`by`: another inbox, a daemon's own page), or a script that did not say.
  function elsewhere(event) {
    if (event.by) return "elsewhere (by " + event.by + ")";
    return event.client ? "in another tab" : "elsewhere (by a script or another client)";
  }

  // What a removed event says, from this tab's point of view.
  function removedNote(event) {
    const mine = event.client === client && !event.by;
    if (event.reason === "answered") {
      return (mine ? "Answered" : "Answered " + elsewhere(event)) + ": " + shown(event.answer) + "." + held(event.heldFor);
    }
    if (event.reason === "dismissed") return mine ? "Dismissed." : "Dismissed " + elsewhere(event) + ".";
    if (event.reason === "timed_out") return "Timed out: nobody answered in time.";
    return sentence(event.note);
  }

  function place(card, before) {
    if (before) before.replaceWith(card); else list.appendChild(card);
  }

  function add(q) {
    const known = cards.get(q.id);
    if (known && !known.classList.contains("gone")) {
      if (known.classList.contains("held")) release(known);
      return;
    }
    // The same question from a restarted hotseam (a new id): it takes the old card's place.
    let before = known || null;
    if (!before) {
      const same = fingerprint(q);
      for (const [id, card] of cards) {
        if (card.fingerprint === same && (card.classList.contains("held") || card.stale)) {
          before = card;
          cards.delete(id);
          break;
        }
      }
    }
    if (before) {
      clearTimeout(before.timer);
      if (!before.classList.contains("gone")) drafts.set(before.fingerprint, before.draft());
    }
    const card = render(q);
    cards.set(q.id, card);
    place(card, before);
  }

  function hold(card, why) {
    if (card.classList.contains("gone")) return;
    clearTimeout(card.timer);
    card.classList.add("held");
    card.setAttribute("aria-disabled", "true");
    card.enable(false);
    card.holdNote.textContent = why;
  }

  function release(card) {
    clearTimeout(card.timer);
    card.classList.remove("held");
    card.removeAttribute("aria-disabled");
    card.holdNote.textContent = "";
    card.enable(true);
  }

  function holdAll(why) {
    for (const card of cards.values()) hold(card, why);
    refresh();
  }

  function finish(id, note, linger) {
    const card = cards.get(id);
    if (!card || card.classList.contains("gone")) return;
    clearTimeout(card.timer);
    const hadFocus = card.contains(document.activeElement);
    if (card.draft) drafts.set(card.fingerprint, card.draft());
    card.classList.remove("held");
    card.classList.add("gone");
    card.stale = Boolean(linger);
    card.replaceChildren(el("p", { class: "note", role: "status", text: note }));
    if (hadFocus) {
      const next = list.querySelector("li.card:not(.gone):not(.held) input, li.card:not(.gone):not(.held) textarea");
      if (next) next.focus();
    }
    refresh();
    if (!linger) card.timer = setTimeout(() => forget(id, card), NOTE_MS);
  }

  function forget(id, card) {
    card.remove();
    if (cards.get(id) === card) cards.delete(id);
    refresh();
  }

  function snapshot(questions) {
    const started = performance.now();
    const live = new Set(questions.map((q) => q.id));
    questions.forEach((q) => add(q));  // first: a question back from a restart takes its old place
    for (const [id, card] of cards) {
      if (live.has(id)) continue;
      if (card.stale) {  // a note from before hotseam came back: its question may follow
        clearTimeout(card.timer);
        card.timer = setTimeout(() => forget(id, card), RETURN_MS);
      } else if (card.classList.contains("held")) {
        clearTimeout(card.timer);
        card.timer = setTimeout(() => finish(id, "No longer asked."), RETURN_MS);
      } else if (!card.classList.contains("gone")) finish(id, "No longer pending.");
    }
    refresh();
    // Read by bench/web.py: building the cards, and the first frame that shows them.
    window.__hotseamSnapshotMs = performance.now() - started;
    requestAnimationFrame(() => setTimeout(() => {
      window.__hotseamPainted = { received: started, painted: performance.now() };
    }));
  }

  function onEvent(event) {
    if (event.type === "snapshot") snapshot(event.questions);
    else if (event.type === "added") { add(event.question); refresh(); }
    else if (event.type === "changed") {
      const card = cards.get(event.question.id);
      if (card && !card.classList.contains("gone")) card.update(event.question); else add(event.question);
      refresh();
    }
    else if (event.type === "removed") {
      const card = cards.get(event.id);
      if (!card) return;
      if (event.reason !== "withdrawn") { finish(event.id, removedNote(event)); return; }
      // A reload withdraws a question, then asks it again: hold it in place meanwhile.
      hold(card, "On hold: not answerable right now.");
      card.timer = setTimeout(() => finish(event.id, removedNote(event)), HOLD_MS);
      refresh();
    } else if (event.type === "closing") {
      connection = "connecting";
      setStatus("The inbox closed (" + event.note + "); reconnecting…", true);
      holdAll("On hold while the inbox reconnects: not answerable right now.");
    }
  }

  function connect() {
    source = new EventSource("api/events?token=" + encodeURIComponent(token));
    source.onopen = () => {
      retry = 250;
      connection = "live";
      setStatus("Live: new questions appear by themselves.", false);
      refresh();
    };
    source.onmessage = (message) => onEvent(JSON.parse(message.data));
    source.onerror = () => {
      // CONNECTING: the browser tries again by itself (after the stream's "retry:").
      // CLOSED: an HTTP error (a refused token, a reload under way): it gives up; we retry.
      const gaveUp = source.readyState === EventSource.CLOSED;
      if (gaveUp) source.close();
      if (connection === "live") {
        connection = "connecting";
        setStatus("Reconnecting…", false);
        refresh();
      }
      probe(gaveUp);
    };
  }

  // The stream ended or failed: find out why (a reload, a stop, another token) and say so.
  let probing = false;
  async function probe(reconnect) {
    if (probing) { if (reconnect) schedule(retry); return; }
    probing = true;
    let response = null;
    try {
      response = await fetch("api/questions", { headers: { "x-hotseam-token": token }, cache: "no-store" });
    } catch (unreachable) {
      stopped("hotseam is not running: it stopped, or cannot be reached. This page reconnects by itself when it is back.");
    } finally {
      probing = false;
    }
    if (response && response.status === 401) {
      connection = "bad-token";
      setStatus("This page's link is no longer accepted: hotseam was started again with another token. " +
                "Open the inbox's current address: 'hotseam status' shows it.", true);
      for (const [id, card] of cards) {
        if (!card.classList.contains("gone")) finish(id, "Not answerable from this page: its link's token is no longer valid.", true);
      }
      refresh();
      if (reconnect) schedule(5000);
      return;
    }
    if (response && response.status === 503) setStatus("The inbox is being reloaded; reconnecting…", true);
    else if (response && !response.ok) setStatus("hotseam answered HTTP " + response.status + "; retrying…", true);
    if (reconnect) {
      schedule(retry);
      retry = Math.min(retry * 2, 2000);
    }
  }

  function stopped(why) {
    connection = "stopped";
    setStatus(why, true);
    for (const [id, card] of cards) {
      if (!card.classList.contains("gone")) {
        finish(id, "Not answered: hotseam stopped while it was asked. If hotseam asks it again, it comes back here.", true);
      }
    }
    refresh();
  }

  function schedule(ms) {
    setTimeout(connect, ms);
  }

  if (!token) {
    connection = "bad-token";
    setStatus("This link has no ?token=…: open the address hotseam printed, or the one 'hotseam status' shows.", true);
  } else connect();
  refresh();
})();
