// Cairn inspector: small progressive enhancements. Every page works without this file.
// Listeners are delegated from the document, so content swapped in later is enhanced too.
(function () {
  "use strict";

  // Filter forms marked data-autosubmit apply as soon as a select changes.
  document.addEventListener("change", function (event) {
    var el = event.target;
    if (el.tagName === "SELECT" && el.form && el.form.hasAttribute("data-autosubmit")) {
      el.form.requestSubmit();
    }
  });

  // A form marked data-swap="ID" posts in the background and replaces the element ID with the
  // same element of the page the server answers (the same page a plain post shows), so the
  // page keeps its place and a reload does not post again. Any failure falls back to a plain
  // post.
  function swap(form, event) {
    var id = form.getAttribute("data-swap");
    var target = document.getElementById(id);
    if (!target || !window.fetch || !window.DOMParser) { return; }
    event.preventDefault();
    window.fetch(form.action, { method: "POST", body: new FormData(form), credentials: "same-origin" })
      .then(function (response) { return response.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById(id);
        if (!fresh) { throw new Error("no #" + id + " in the answer"); }
        target.replaceWith(fresh);
        var box = fresh.querySelector("textarea, input:not([type=hidden])");
        if (box) { box.focus(); }
      })
      .catch(function () { form.submit(); });
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    // Forms marked data-confirm ask once more before a destructive post.
    if (form.hasAttribute("data-confirm") && !window.confirm(form.getAttribute("data-confirm"))) {
      event.preventDefault();
      return;
    }
    if (form.method !== "post") { return; }
    // A posted form disables its buttons, so a slow post is not sent twice.
    window.setTimeout(function () {
      form.querySelectorAll("button[type=submit]").forEach(function (b) { b.disabled = true; });
    }, 0);
    if (form.hasAttribute("data-swap")) { swap(form, event); }
  });

  document.addEventListener("keydown", function (event) {
    var active = document.activeElement;
    var tag = (active && active.tagName) || "";
    // Ctrl+Enter (or Cmd+Enter) in a text area submits its form.
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && tag === "TEXTAREA" && active.form) {
      event.preventDefault();
      active.form.requestSubmit();
      return;
    }
    // "/" focuses the page's search box (an input marked data-shortcut="/").
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") { return; }
    var box = document.querySelector("[data-shortcut='/']");
    if (box) { event.preventDefault(); box.focus(); box.select(); }
  });
})();
