import sys, math, json, torch
from duorl.algos.flashsac.networks import FlashSACCritic
for d in sys.argv[1:]:
    s=torch.load(d+'/checkpoints/final.pt',map_location='cpu',weights_only=False)
    a=s['config']['algo']
    c=FlashSACCritic(3,1,a['critic_hidden_dim'],a['critic_num_blocks'],a['block_expansion'],a['num_atoms'],a['v_min'],a['v_max'])
    c.load_state_dict(s['learner']['critic'])
    rs=s['learner']['reward_scale']; scale=float(max(math.sqrt(rs['var']+1e-8), rs['max_abs']/a['normalized_return_max'])) if a['normalize_reward'] else 1.0
    obs=torch.tensor([[1.,0.,0.],[-1.,0.,0.]]); act=torch.zeros(2,1)
    with torch.no_grad(): p=c(obs,act,training=False).softmax(-1)
    q=(p*c.support).sum(-1).min(0).values
    ent=-(p*p.clamp_min(1e-12).log()).sum(-1).mean()
    rows=[json.loads(l) for l in open(d+'/metrics.jsonl')]
    r=rows[-1]
    print(f"{d.split('/')[-1]:24s} tau {a['tau']} final {r['Train/mean_episode_return']:6.1f} critic_CE {r['Loss/critic']:.2f} q_mean {r['Policy/q_mean']:.2f} scale {scale:5.2f} Q(up) {q[0]*scale:5.1f} raw Q(hang) {q[1]*scale:5.1f} raw  ent {ent:.2f} alpha {r['Policy/alpha']:.4f} H {r['Policy/entropy']:.2f}")
