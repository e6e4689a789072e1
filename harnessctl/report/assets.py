"""The report's inline stylesheet and script (no fonts, images or scripts from elsewhere)."""

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;
 color:#1d2330;background:#f6f7f9}
main{max-width:1320px;margin:0 auto;padding:18px 28px 60px}
h1{font-size:22px;margin:6px 0 2px}h2{font-size:17px;margin:28px 0 8px;
 border-bottom:1px solid #d8dce3;padding-bottom:4px}
.meta{color:#5b6474;font-size:13px}.note{color:#5b6474;font-size:12.5px;margin:4px 0 8px}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
table{border-collapse:collapse;background:#fff;margin:6px 0}
th,td{border:1px solid #dfe3ea;padding:4px 8px;text-align:right;white-space:nowrap}
th{background:#eef1f5;font-weight:600}td.name,th.name{text-align:left}
td.cell a{color:inherit;text-decoration:none;display:block}
td.cell:hover{outline:2px solid #3b6fd8;outline-offset:-2px;cursor:pointer}
.scroll{overflow-x:auto}
ul.tree,ul.tree ul{list-style:none;margin:0;padding-left:26px}
ul.tree{padding-left:0}ul.tree li{position:relative;margin:6px 0}
ul.tree ul li::before{content:"";position:absolute;left:-16px;top:-6px;width:12px;
 height:20px;border-left:2px solid #9aa6b8;border-bottom:2px solid #9aa6b8}
.node{display:inline-block;background:#fff;border:1px solid #c9d1dd;border-radius:6px;
 padding:3px 9px}.node.root{border-color:#1d2330;font-weight:600}
.edge{display:inline-block;font-size:12px;background:#e6f0ff;color:#1f4fa8;
 border-radius:10px;padding:1px 8px;margin-right:6px}
.rej{font-size:12px;color:#6b7280;margin:2px 0 2px 4px}
.rej li{margin:1px 0}.tag{display:inline-block;border-radius:8px;padding:0 6px;
 font-size:11.5px;background:#fde8e8;color:#9b1c1c}.tag.ev{background:#fff4d6;color:#8a5a00}
.ok{color:#0b7a3b;font-weight:600}.bad{color:#b42318;font-weight:600}
#trajectories .rollout{background:#fff;border:1px solid #d8dce3;border-radius:6px;
 margin:8px 0;padding:6px 10px}
#trajectories pre{white-space:pre-wrap;word-break:break-word;margin:2px 0 6px;
 background:#f3f4f6;padding:5px 7px;border-radius:4px;font-size:12px}
#trajectories .role{font-size:11.5px;color:#5b6474;font-weight:600}
#traj-title{font-weight:600}
#heatmap-table th{white-space:normal;max-width:96px;vertical-align:bottom;
overflow-wrap:anywhere}
#heatmap-table td.cell{min-width:44px}
#traj-list.pair{display:grid;grid-template-columns:1fr 1fr;gap:10px;align-items:start}
#traj-list.pair .rollout{min-width:0}
"""

# Renders the rollouts of a clicked cell from the JSON blob; text goes in via textContent.
JS = """
(function(){
const data=JSON.parse(document.getElementById('report-data').textContent);
const box=document.getElementById('traj-list'), title=document.getElementById('traj-title');
function el(tag,cls,text){const e=document.createElement(tag);if(cls)e.className=cls;
 if(text!==undefined&&text!==null)e.textContent=String(text);return e;}
function pre(label,text){const d=el('div');d.appendChild(el('div','role',label));
 d.appendChild(el('pre','',text));return d;}
function show(id){
 const cell=data.cells[id]; if(!cell) return;
 title.textContent=cell.title+' \\u2014 '+cell.shown+' of '+cell.total+' rollouts shown';
 box.textContent=''; box.setAttribute('data-shown',id);
 box.className=cell.pair?'pair':'';
 for(const rid of cell.ids){
  const r=data.rollouts[rid]; const d=el('div','rollout');
  if(!r){d.appendChild(el('div','mono','rollout '+rid+' (not embedded)'));box.appendChild(d);
   continue;}
  const h=el('div','mono',r.id.slice(0,12)+'  '+r.harness+'  task '+r.task+' ('+r.category+
   ')  seed '+r.seed+'  steps '+r.steps+'  tokens '+r.tokens[0]+'+'+r.tokens[1]+'  ');
  h.appendChild(el('span',r.success?'ok':'bad',r.outcome)); d.appendChild(h);
  if(r.error) d.appendChild(pre('error',r.error));
  if(r.missing){d.appendChild(el('div','note','trajectory file missing'));box.appendChild(d);
   continue;}
  const det=el('details'); det.appendChild(el('summary','','last call: '+
   r.messages.length+' messages, then '+r.turns.length+' turns'));
  for(const m of r.messages) det.appendChild(pre(m.role,m.content));
  det.appendChild(pre('reply (last call)',r.last_reply));
  for(const c of r.tool_calls||[]) det.appendChild(pre('tool call (last call)',c));
  d.appendChild(det);
  for(const t of r.turns){
   let s='round '+t.round+' ['+t.kind+']\\n'+t.reply;
   if(t.action_error) s+='\\n! '+t.action_error;
   if(t.observation) s+='\\n= '+t.observation;
   d.appendChild(pre('turn '+t.round,s));
   if(t.feedback) d.appendChild(pre('harness feedback',t.feedback));
  }
  if((r.env_steps||[]).length){
   d.appendChild(pre('environment steps',(r.env_steps).map(st=>st.kind+' ['+st.status+
    (st.done?', done':'')+'] '+st.action+'\\n= '+st.observation).join('\\n')));
  }
  d.appendChild(pre('result','status '+r.result.status+'  answer '+r.result.answer+
   (r.result.traceback?'\\n'+r.result.traceback:'')+'\\nscore '+r.score.success+' '+
   r.score.detail));
  box.appendChild(d);
 }
 document.getElementById('trajectories').scrollIntoView();
}
// A link such as report.html#cell=c3 opens that cell's rollouts on load.
const m=/^#cell=(c\\d+)$/.exec(location.hash); if(m) show(m[1]);
document.addEventListener('click',function(ev){
 const a=ev.target.closest('[data-cell]'); if(!a) return; ev.preventDefault();
 show(a.getAttribute('data-cell'));});
})();
"""
