'use strict';
// The plotly.js of tracesleuth's HTML reports: the core (with the scatter trace and every
// component: legend, hover, shapes, annotations, update menus, colour bars...) and the trace
// types the report's figures use. A figure of another type makes Report fall back to the full
// bundle of the plotly Python package (tracesleuth.report.document.PARTIAL_TRACE_TYPES).
var Plotly = require('plotly.js/lib/core');
Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/heatmap')]);
module.exports = Plotly;
