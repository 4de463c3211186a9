// Builds ../../src/tracesleuth/report/vendor/plotly-report.min.js with plotly.js's own esbuild
// settings (esbuild-config.js of plotly.js), minified, without the maplibre-gl stylesheet that
// only the map traces use (83 KB).
const fs = require('fs');
const path = require('path');
const esbuild = require('esbuild');
const { environmentPlugin } = require('esbuild-plugin-environment');
const InlineCSSPlugin = require('esbuild-plugin-inline-css');

const noMapStyles = {
  name: 'no-map-styles',
  setup(build) {
    build.onResolve({ filter: /^maplibre-gl\/dist\/maplibre-gl\.css$/ }, () => ({ path: 'empty', namespace: 'empty' }));
    build.onLoad({ filter: /.*/, namespace: 'empty' }, () => ({ contents: '', loader: 'js' }));
  },
};
const version = require('plotly.js/package.json').version;
const out = path.join(__dirname, '..', '..', 'src', 'tracesleuth', 'report', 'vendor', 'plotly-report.min.js');

esbuild.build({
  entryPoints: [path.join(__dirname, 'entry.js')], write: false, format: 'iife', globalName: 'Plotly',
  bundle: true, minify: true, sourcemap: false, legalComments: 'none',
  plugins: [noMapStyles, InlineCSSPlugin(), environmentPlugin({ NODE_DEBUG: false })],
  alias: { regl: '@plotly/regl', stream: 'stream-browserify' },
  define: { global: 'window', 'define.amd': 'false' }, target: 'es2016', logLevel: 'info',
}).then((result) => {
  const header = `/*! plotly.js ${version} (MIT License, Plotly Technologies Inc.): core, bar, heatmap; ` +
    'built by tools/plotly-bundle of tracesleuth */\n';
  fs.writeFileSync(out, header + result.outputFiles[0].text);
  console.log(`${out}: ${fs.statSync(out).size} bytes`);
}).catch(() => process.exit(1));
