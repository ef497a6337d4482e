// The hotseam web inbox. Every model-written string goes through textContent, never HTML.
"use strict";
(function () {
  const token = new URLSearchParams(location.search).get("token") || "";
  const list = document.getElementById("questions");
  const empty = document.getElementById("empty");
  const status = document.getElementById("status");
  const cards = new Map();   // question id -> card element
  const drafts = new Map();  // fingerprint -> {choice, text}: kept when a question is re-asked
  const NOTE_MS = 4000;
  let source = null;
  let retry = 250;

  const REASONS = {
    answered: "Answered in another tab.",
    dismissed: "Dismissed in another tab.",
    timed_out: "Timed out: nobody answered in time.",
  };

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

  function refreshEmpty() {
    empty.hidden = list.querySelector("li.card:not(.gone)") !== null;
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
    const answerButton = el("button", { type: "submit", class: "answer", text: "Answer" });
    const dismissButton = el("button", { type: "button", class: "dismiss", text: "Dismiss" });
    const form = el("form", { "aria-labelledby": base + "-title", novalidate: true }, [
      el("fieldset", {}, [el("legend", { id: base + "-title", text: q.question }), ...controls]),
      el("div", { class: "actions" }, [answerButton, dismissButton]),
      error,
    ]);
    const card = el("li", { class: "card", id: base, "data-id": q.id }, [
      el("p", { class: "meta", text: "Asked by " + who + " at " + asked }),
      q.header ? el("h2", { text: q.header }) : null,
      form,
    ]);
    card.fingerprint = fingerprint(q);
    card.draft = () => {
      const chosen = form.querySelector("input[type=radio]:checked");
      return { choice: chosen ? chosen.value : null, text: custom ? custom.value : "" };
    };
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const chosen = form.querySelector("input[type=radio]:checked");
      let body;
      if (q.options.length && (!chosen || chosen.value !== "own")) {
        if (!chosen) { error.textContent = "Choose an option."; return; }
        body = { option: Number(chosen.value) };
      } else {
        if (!custom.value.trim()) { error.textContent = "Type an answer first."; custom.focus(); return; }
        body = { text: custom.value };
      }
      send(card, "answer", body, answerButton, dismissButton, error);
    });
    dismissButton.addEventListener("click", () => send(card, "dismiss", {}, answerButton, dismissButton, error));
    return card;
  }

  async function send(card, action, body, answerButton, dismissButton, error) {
    answerButton.disabled = dismissButton.disabled = true;
    error.textContent = "";
    card.sending = action;
    try {
      const response = await fetch("api/questions/" + encodeURIComponent(card.dataset.id) + "/" + action, {
        method: "POST",
        headers: { "content-type": "application/json", "x-hotseam-token": token },
        body: JSON.stringify(body),
        cache: "no-store",
      });
      if (response.ok) {
        drafts.delete(card.fingerprint);
        remove(card.dataset.id, action === "answer" ? "Answered." : "Dismissed.");
        return;
      }
      const data = await response.json().catch(() => ({}));
      const message = (data.error && data.error.message) || "HTTP " + response.status;
      if (response.status === 409 || response.status === 404) {
        remove(card.dataset.id, data.error && data.error.code === "ALREADY_ANSWERED"
          ? "Already answered (in another tab)." : "No longer pending: " + message);
        return;
      }
      error.textContent = message;
    } catch (failure) {
      error.textContent = "Could not reach hotseam: " + failure.message;
    }
    card.sending = null;
    answerButton.disabled = dismissButton.disabled = false;
  }

  function add(q, into) {
    if (cards.has(q.id)) return;
    const card = render(q);
    cards.set(q.id, card);
    (into || list).appendChild(card);
    if (!into) refreshEmpty();
  }

  function remove(id, note) {
    const card = cards.get(id);
    if (!card || card.classList.contains("gone")) return;
    const hadFocus = card.contains(document.activeElement);
    card.classList.add("gone");
    card.replaceChildren(el("p", { class: "note", role: "status", text: note }));
    if (hadFocus) {
      const next = list.querySelector("li.card:not(.gone) input, li.card:not(.gone) textarea");
      if (next) next.focus();
    }
    refreshEmpty();
    setTimeout(() => { card.remove(); if (cards.get(id) === card) cards.delete(id); }, NOTE_MS);
  }

  function snapshot(questions) {
    const started = performance.now();
    const live = new Set(questions.map((q) => q.id));
    for (const [id, card] of cards) {
      if (!live.has(id) && !card.classList.contains("gone")) {
        if (card.draft) drafts.set(card.fingerprint, card.draft());
        remove(id, "No longer pending.");
      }
    }
    const batch = document.createDocumentFragment();
    questions.forEach((q) => add(q, batch));
    list.appendChild(batch);
    refreshEmpty();
    // Read by bench/web.py: building the cards, and the first frame that shows them.
    window.__hotseamSnapshotMs = performance.now() - started;
    requestAnimationFrame(() => setTimeout(() => {
      window.__hotseamPainted = { received: started, painted: performance.now() };
    }));
  }

  function connect() {
    source = new EventSource("api/events?token=" + encodeURIComponent(token));
    source.onopen = () => { retry = 250; status.textContent = "Live: new questions appear by themselves."; };
    source.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (event.type === "snapshot") snapshot(event.questions);
      else if (event.type === "added") add(event.question, null);
      else if (event.type === "removed") {
        const card = cards.get(event.id);
        if (card && event.reason === "withdrawn" && card.draft) drafts.set(card.fingerprint, card.draft());
        let note = REASONS[event.reason] || sentence(event.note);
        if (card && card.sending === "answer" && event.reason === "answered") note = "Answered.";
        if (card && card.sending === "dismiss" && event.reason === "dismissed") note = "Dismissed.";
        remove(event.id, note);
      } else if (event.type === "closing") status.textContent = "Reconnecting (" + event.note + ")…";
    };
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {
        status.textContent = "Disconnected; retrying…";
        source.close();
        setTimeout(connect, retry);
        retry = Math.min(retry * 2, 5000);
      } else {
        status.textContent = "Reconnecting…";
      }
    };
  }

  if (!token) status.textContent = "This link has no ?token=…: open the URL hotseam printed.";
  else connect();
  refreshEmpty();
})();
