// htm bound to Preact's h: every component's template tag.
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);
