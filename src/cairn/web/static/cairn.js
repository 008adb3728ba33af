// Cairn inspector: small progressive enhancements. Every page works without this file.
(function () {
  "use strict";

  // Filter forms marked data-autosubmit apply as soon as a select changes.
  document.querySelectorAll("form[data-autosubmit] select").forEach(function (select) {
    select.addEventListener("change", function () { select.form.requestSubmit(); });
  });

  // Forms marked data-confirm ask once more before a destructive post.
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.getAttribute("data-confirm"))) { event.preventDefault(); }
    });
  });

  // A submitted form disables its buttons, so a slow post is not sent twice.
  document.querySelectorAll("form[method=post]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (event.defaultPrevented) { return; }
      window.setTimeout(function () {
        form.querySelectorAll("button[type=submit]").forEach(function (b) { b.disabled = true; });
      }, 0);
    });
  });

  // "/" focuses the page's search box (an input marked data-shortcut="/").
  document.addEventListener("keydown", function (event) {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) { return; }
    var tag = (document.activeElement && document.activeElement.tagName) || "";
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") { return; }
    var box = document.querySelector("[data-shortcut='/']");
    if (box) { event.preventDefault(); box.focus(); box.select(); }
  });

  // Ctrl+Enter (or Cmd+Enter) in a text area submits its form.
  document.querySelectorAll("textarea").forEach(function (area) {
    area.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && area.form) {
        event.preventDefault();
        area.form.requestSubmit();
      }
    });
  });
})();
