// MHA Explorer's address bar (ui/widgets/address.py): put the app's query in it without a new history entry.
// Path and hash stay; nothing happens when the address already says it (a reload, Back, a run that changed nothing).
export default function ({data}) {
  if (window.location.search.replace(/^\?/, "") === data.query) return;
  const url = new URL(window.location.href);
  url.search = data.query;
  window.history.replaceState(window.history.state, "", url.toString());
}
