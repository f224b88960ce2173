// The dashboard page: Preact components bundled by scripts/build-ui.js into ../assets/app.js.
// Every value from Redis is rendered as text by Preact, never as HTML, so run inputs and errors
// cannot inject markup.
import { render } from 'preact';

import { App } from './app';

const root = document.getElementById('app');
if (root) render(<App />, root);
