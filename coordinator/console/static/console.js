// oce console: live deploy progress (server-sent events) and small
// conveniences. Loaded as a file (the CSP allows no inline script); it reads
// what it needs from data-* attributes and writes text only (textContent).
(function () {
  "use strict";

  function set(id, text) {
    var el = document.getElementById(id);
    if (el) { el.textContent = text == null ? "" : String(text); }
  }

  function badge(state) {
    var el = document.getElementById("agent-state");
    if (!el || !state) { return; }
    el.textContent = state;
    el.setAttribute("data-state", state);
    var cls = { serving: "ok", activating: "busy", deleting: "busy", degraded: "warn", failed: "bad" }[state] || "idle";
    el.className = "badge " + cls;
  }

  function steps(list) {
    var ol = document.getElementById("progress-steps");
    if (!ol || !list) { return; }
    while (ol.firstChild) { ol.removeChild(ol.firstChild); }
    list.forEach(function (s) {
      var li = document.createElement("li");
      li.textContent = s.label;
      li.setAttribute("data-phase", s.name);
      li.className = s.now ? "now" : (s.done ? "done" : "");
      ol.appendChild(li);
    });
  }

  var panel = document.querySelector("[data-events]");
  if (panel && window.EventSource) {
    var reload = function () { window.location.replace(window.location.pathname); };
    var es = new EventSource(panel.getAttribute("data-events"));
    es.addEventListener("progress", function (e) {
      var p = JSON.parse(e.data);
      set("progress-kind", p.kind);
      set("progress-phase", p.phase);
      set("progress-elapsed", p.elapsed);
      set("progress-code", p.code ? "last attempt: " + p.code : "");
      steps(p.steps);
      badge(p.state);
      if (p.revision) { set("active-rev", "#" + p.revision); }
    });
    es.addEventListener("done", function (e) {
      es.close();
      var p = JSON.parse(e.data);
      badge(p.state);
      if (p.revision) { set("active-rev", "#" + p.revision); }
      reload();
    });
    es.onerror = function () {
      es.close();
      window.setTimeout(reload, 2000);
    };
  }

  // Confirm a stop; keep an unsaved edit from being dropped by accident.
  var stop = document.getElementById("stop");
  if (stop) {
    stop.form.addEventListener("submit", function (e) {
      if (!window.confirm("Stop this Agent? Its runtime stops and it serves nothing until the next deploy.")) {
        e.preventDefault();
      }
    });
  }
  var content = document.getElementById("content");
  if (content && !content.readOnly) {
    var initial = content.value, submitting = false;
    content.form.addEventListener("submit", function () { submitting = true; });
    window.addEventListener("beforeunload", function (e) {
      if (!submitting && content.value !== initial) { e.preventDefault(); e.returnValue = ""; }
    });
  }
})();
