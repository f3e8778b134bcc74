/** The dashboard's entry point (built by scripts/build-dashboard.mjs into dist/dashboard/app.js). */
import { render } from 'hono/jsx/dom';
import { App } from './app.tsx';

const root = document.getElementById('app');
if (root) {
  root.textContent = '';
  render(<App />, root);
}
