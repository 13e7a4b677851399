// loadknee in Locust's web UI: the live view above the Knee table, and a start form that fits
// the stepped shape. Plain script, no library, no network beyond this Locust's own routes.
(function () {
  "use strict";
  var FORM = __LK_FORM__;
  var root = (document.currentScript && document.currentScript.src || "").replace(/loadknee\/ui\.js.*$/, "");
  var STYLE =
    "#lk-live{margin:8px 0 16px;font-size:14px;line-height:1.45}" +
    "#lk-live .lk-status{margin:4px 0}" +
    "#lk-live .lk-banner{padding:6px 10px;margin:4px 0;border-radius:4px;border-left:4px solid}" +
    "#lk-live .lk-bad{border-color:#ef4444;background:rgba(239,68,68,.14)}" +
    "#lk-live .lk-warn{border-color:#f59e0b;background:rgba(245,158,11,.14)}" +
    "#lk-live .lk-good{border-color:#10b981;background:rgba(16,185,129,.14)}" +
    "#lk-live .lk-charts{display:flex;flex-wrap:wrap;gap:8px;margin:8px 0}" +
    "#lk-live .lk-chart{border:1px solid rgba(128,128,128,.35);border-radius:4px}" +
    "#lk-live .lk-v-past-knee{color:#ef4444;font-weight:bold}#lk-live .lk-v-follows{color:#10b981}" +
    "#lk-live table{border-collapse:collapse;margin:6px 0}" +
    "#lk-live td,#lk-live th{border-bottom:1px solid rgba(128,128,128,.3);padding:3px 8px;text-align:left}" +
    "#lk-live .lk-v-knee,#lk-live .lk-v-red-line{color:#ef4444;font-weight:bold}" +
    "#lk-live .lk-v-critical{color:#f59e0b;font-weight:bold}" +
    "#lk-live .lk-v-comfortable{color:#10b981}" +
    "#lk-live .lk-noisy{cursor:help;font-weight:bold;margin-left:1px}" +
    "#lk-live .lk-end{margin:8px 0}#lk-live a{color:#3b82f6}" +
    ".lk-group-title{font-weight:bold;margin:12px 0 -8px;opacity:.85}" +
    ".lk-users-note{font-size:12px;opacity:.8;margin-top:-8px}";

  function addStyle() {
    if (document.getElementById("lk-style")) return;
    var el = document.createElement("style");
    el.id = "lk-style";
    el.textContent = STYLE;
    document.head.appendChild(el);
  }

  // -- the live view ---------------------------------------------------------------------------
  var busy = false;
  function refresh(box) {
    if (busy) return;
    busy = true;
    fetch(root + "loadknee/live/fragment", { cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) { box.innerHTML = html; })
      .catch(function () {})
      .then(function () { busy = false; });
  }

  function kneeTable() {
    var ths = document.querySelectorAll("th");
    for (var i = 0; i < ths.length; i++) {
      if (ths[i].textContent === "Output tok/s") return ths[i].closest("table");
    }
    return null;
  }

  function placeLive() {
    var standalone = document.getElementById("lk-live");
    if (standalone && !standalone.dataset.inTab) return standalone;
    var table = kneeTable();
    if (!table) return null;
    var holder = table.closest(".MuiTableContainer-root") || table;
    var box = document.getElementById("lk-live");
    if (!box || box.nextSibling !== holder) {
      if (box) box.remove();
      box = document.createElement("div");
      box.id = "lk-live";
      box.dataset.inTab = "1";
      holder.parentNode.insertBefore(box, holder);
      refresh(box);
    }
    return box;
  }

  // -- the start form ---------------------------------------------------------------------------
  function fieldRoot(input) {
    return input.closest(".MuiFormControlLabel-root") || input.closest(".MuiFormControl-root") || input.parentElement;
  }

  // Locust's React form names each input in camelCase (llm_levels -> llmLevels) and lists them
  // alphabetically: relabel each, and order them by section with CSS (never moving React's nodes).
  function fitForm() {
    var k = 0;
    Object.keys(FORM.groups).forEach(function (group) {
      var first = true;
      Object.keys(FORM.fields).forEach(function (dest) {
        var info = FORM.fields[dest];
        if (info.group !== group) return;
        k += 2;  // fields at even places; a section title just before its first field
        var input = document.querySelector('[name="' + info.input + '"]') ||
          document.querySelector('[name="' + dest + '"]');
        var box = input && fieldRoot(input);
        var holder = box && box.parentElement;
        if (!holder) return;
        box.style.order = String(k);
        if (first) {
          first = false;
          var title = holder.querySelector('.lk-group-title[data-group="' + group + '"]');
          if (!title) {
            title = document.createElement("div");
            title.className = "lk-group-title";
            title.dataset.group = group;
            title.textContent = FORM.groups[group] || group;
            holder.appendChild(title);  // appended, never inserted between React's nodes
          }
          title.style.order = String(k - 1);
          if (holder.style.display !== "flex") {
            holder.style.display = "flex";
            holder.style.flexDirection = "column";
          }
        }
        if (box.dataset.lkDone) return;
        box.dataset.lkDone = "1";
        box.title = info.help;
        var label = box.querySelector(".MuiFormControlLabel-label") || box.querySelector("label");
        if (label) label.textContent = info.label;
        var notch = box.querySelector("legend span");  // the outline's gap sized to the label
        if (notch) notch.textContent = info.label;
      });
    });
    var users = document.querySelector('[name="userCount"]');
    if (users && users.disabled && !document.querySelector(".lk-users-note")) {
      var note = document.createElement("div");
      note.className = "lk-users-note";
      note.textContent = FORM.open_loop ?
        "Open loop: the rates drive the load, one stage per rate from \u201cRates " +
        "(requests/s)\u201d (Custom parameters \u2192 Sweep); users and ramp-up are not used." :
        "The stepped shape drives the load: users and ramp-up come from " +
        "\u201cLevels (users)\u201d (Custom parameters \u2192 Sweep), one stage per level.";
      var ramp = document.querySelector('[name="spawnRate"]');
      var after = fieldRoot(ramp || users);
      after.parentNode.insertBefore(note, after.nextSibling);
    }
  }

  function tick() {
    addStyle();
    fitForm();
    var box = placeLive();
    if (box) refresh(box);
  }

  function start() {
    tick();
    setInterval(tick, 2000);
    new MutationObserver(function () { fitForm(); placeLive(); }).observe(document.body, { childList: true, subtree: true });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
