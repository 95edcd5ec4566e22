// MHA Explorer's address bar (ui/widgets/address.py): put the app's query in it, keeping path and hash.
// A run's change replaces the address (no history entry); a link followed on the page shown, whose query the
// address bar does not carry yet, pushes one, so Back returns to where the link was clicked.
export default function ({data}) {
  const same = (a, b) => new URLSearchParams(a).toString() === new URLSearchParams(b).toString();
  if (same(window.location.search, data.query)) return;
  const url = new URL(window.location.href);
  url.search = data.query;
  if (data.link && !same(window.location.search, data.link)) window.history.pushState({}, "", url.toString());
  else window.history.replaceState(window.history.state, "", url.toString());
}
