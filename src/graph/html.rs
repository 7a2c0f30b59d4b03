//! The HTML view of `axle graph`: one self-contained page (no file or network access) holding
//! the SVG Graphviz drew, a bar with the module's name, the fusion-kind legend and a search
//! box, and a short script: a graph larger than the window opens at its natural size (top,
//! centred) rather than shrunk to fit, the wheel zooms around the pointer, dragging pans, typing in the
//! search box highlights the nodes and clusters whose text (name, opcode, shape) contains it and
//! dims the rest, Enter centres the next hit, and the `fit` button shows the whole graph. A URL
//! ending in `#search=TEXT` opens with that search.

use std::fmt::Write as _;

use super::dot::kind_colors;
use super::{GraphView, ViewForm};
use axle_ir::FusionKind;

/// `s` escaped for HTML text.
fn escaped(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The `<svg>` element of Graphviz's output, without the XML prolog and with its fixed size
/// taken off so that it fills the page.
fn inline_svg(svg: &str) -> String {
    let Some(start) = svg.find("<svg") else {
        return String::new();
    };
    let body = &svg[start..];
    let tag_end = body.find('>').unwrap_or(body.len());
    let mut tag = body[..tag_end].to_string();
    for attr in ["width", "height"] {
        let key = format!(" {attr}=\"");
        if let Some(a) = tag.find(&key) {
            if let Some(len) = tag[a + key.len()..].find('"') {
                tag.replace_range(a..a + key.len() + len + 1, "");
            }
        }
    }
    format!("{tag} id=\"graph\"{}", &body[tag_end..])
}

const STYLE: &str = "html,body{margin:0;height:100%;font:13px Helvetica,Arial,sans-serif}\
#bar{position:fixed;top:0;left:0;right:0;height:34px;display:flex;align-items:center;gap:10px;\
padding:0 10px;background:#f8fafc;border-bottom:1px solid #cbd5e1;z-index:1}\
#bar input{width:260px;padding:3px 6px}#bar .k{padding:1px 6px;border:1px solid;border-radius:4px}\
#view{position:absolute;top:35px;left:0;right:0;bottom:0}\
#graph{width:100%;height:100%;cursor:grab;user-select:none}\
.hit>path,.hit>polygon,.hit>ellipse{stroke:#e11d48;stroke-width:3}.dim{opacity:.25}";

const SCRIPT: &str = r#"(function(){
const svg=document.getElementById('graph');if(!svg)return;
const q=document.getElementById('q'),count=document.getElementById('count');
const b=svg.viewBox.baseVal,full={x:b.x,y:b.y,w:b.width,h:b.height};
function set(x,y,w,h){svg.setAttribute('viewBox',x+' '+y+' '+w+' '+h);}
function pt(cx,cy){const p=svg.createSVGPoint();p.x=cx;p.y=cy;return p.matrixTransform(svg.getScreenCTM().inverse());}
document.getElementById('fit').onclick=function(){set(full.x,full.y,full.w,full.h);};
const W=svg.clientWidth,H=svg.clientHeight;
if(full.w>W||full.h>H){set(full.x+Math.max(0,(full.w-W)/2),full.y,W,H);}
svg.addEventListener('wheel',function(e){e.preventDefault();const f=e.deltaY<0?0.8:1.25;
const p=pt(e.clientX,e.clientY),v=svg.viewBox.baseVal;
set(p.x-(p.x-v.x)*f,p.y-(p.y-v.y)*f,v.width*f,v.height*f);},{passive:false});
let drag=null;
svg.addEventListener('mousedown',function(e){drag={x:e.clientX,y:e.clientY};});
window.addEventListener('mousemove',function(e){if(!drag)return;
const a=pt(drag.x,drag.y),c=pt(e.clientX,e.clientY),v=svg.viewBox.baseVal;
set(v.x-(c.x-a.x),v.y-(c.y-a.y),v.width,v.height);drag={x:e.clientX,y:e.clientY};});
window.addEventListener('mouseup',function(){drag=null;});
const items=Array.from(svg.querySelectorAll('g.node,g.cluster'));
const texts=items.map(function(n){return Array.from(n.querySelectorAll('text')).map(function(t){return t.textContent;}).join(' ').toLowerCase();});
let hits=[],cur=-1;
q.addEventListener('input',function(){const s=q.value.trim().toLowerCase();hits=[];cur=-1;
items.forEach(function(n,i){const h=s!==''&&texts[i].indexOf(s)>=0;n.classList.toggle('hit',h);
n.classList.toggle('dim',s!==''&&!h);if(h)hits.push(n);});
count.textContent=s?hits.length+' found (Enter: next)':'';});
q.addEventListener('keydown',function(e){if(e.key!=='Enter'||!hits.length)return;
cur=(cur+1)%hits.length;const r=hits[cur].getBoundingClientRect();
const c=pt(r.x+r.width/2,r.y+r.height/2),v=svg.viewBox.baseVal;
set(c.x-v.width/2,c.y-v.height/2,v.width,v.height);});
const m=/^#search=(.*)$/.exec(location.hash);
if(m){q.value=decodeURIComponent(m[1]);q.dispatchEvent(new Event('input'));}
})();"#;

/// The page for `view`, drawn by Graphviz as `svg`.
pub fn page(view: &GraphView, svg: &str) -> String {
    let what = match &view.form {
        ViewForm::Full => String::new(),
        ViewForm::Around { name, depth, .. } => format!(" around {name} (depth {depth})"),
        ViewForm::Summary { .. } => " (per-computation summary)".to_string(),
    };
    let mut legend = String::new();
    for k in [
        FusionKind::Loop,
        FusionKind::Input,
        FusionKind::Output,
        FusionKind::Custom,
    ] {
        let (fill, line) = kind_colors(k);
        let _ = write!(
            legend,
            "<span class=\"k\" style=\"background:{fill};border-color:{line}\">{}</span>",
            k.name()
        );
    }
    let title = escaped(&format!("{}{what}", view.title));
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>axle graph: {title}</title>\
         <style>{STYLE}</style></head>\n<body><div id=\"bar\"><b>{title}</b>\
         <span>{} nodes, {} fusions</span>{legend}\
         <input id=\"q\" placeholder=\"search name, opcode or shape\" autocomplete=\"off\">\
         <span id=\"count\"></span><button id=\"fit\">fit</button></div>\n<div id=\"view\">\n{}\
         </div>\n<script>{SCRIPT}</script></body></html>\n",
        view.nodes.len(),
        view.clusters
            .iter()
            .filter(|c| matches!(c.kind, super::ClusterKind::Fusion(_)))
            .count(),
        inline_svg(svg)
    )
}
