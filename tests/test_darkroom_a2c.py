"""Batched A2C == one plain single-goal A2C per goal (nn.Module, gymnasium SyncVectorEnv, clip_grad_norm_)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import TimeLimit
from torch import nn

from ad.config import make_config
from tasks.darkroom.config import GenerateConfig
from tasks.darkroom.env import DarkRoomEnv
from tasks.darkroom.generate import DARKROOM
from tasks.grid.a2c import _RNG_BLOCK, BatchedA2C, TableLoss, env_seeds


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: a second thread only adds synchronisation (and stalls on a busy machine)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


class RefAgent(nn.Module):
    """Seed 004's agent written the ordinary way: embedding -> ReLU -> actor / critic heads."""

    def __init__(self, agent: BatchedA2C, g: int):
        super().__init__()
        S, H = agent.S, agent.cfg.hidden
        self.embed = nn.Embedding(S, H)
        self.actor = nn.Linear(H, agent.A)
        self.critic = nn.Linear(H, 1)
        with torch.no_grad():  # start from goal g's initial weights
            self.embed.weight.copy_(agent.embed[g].T)
            self.actor.weight.copy_(agent.heads[g, :agent.A])
            self.actor.bias.copy_(agent.bias[g, :agent.A])
            self.critic.weight.copy_(agent.heads[g, agent.A][None])
            self.critic.bias.copy_(agent.bias[g, agent.A][None])

    def forward(self, obs):
        h = F.relu(self.embed(obs))
        return F.log_softmax(self.actor(h), -1), self.critic(h)[:, 0]


def reference_run(cfg, agent: BatchedA2C, g: int, seed: int, updates: int):
    """Train goal g alone with plain per-transition code; returns (actions (U, T, N), model)."""
    model = RefAgent(agent, g)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, betas=tuple(cfg.adam_betas), eps=cfg.adam_eps)
    gen = torch.Generator()
    gen.set_state(agent._ref_gen_state[g])
    N, T = cfg.num_envs, cfg.num_steps
    envs = SyncVectorEnv([lambda: TimeLimit(DarkRoomEnv(cfg.size, agent.goals[g], cfg.random_start,
                                                        cfg.terminate_on_goal), cfg.episode_length)] * N,
                         autoreset_mode=AutoresetMode.SAME_STEP)
    obs, _ = envs.reset(seed=env_seeds(seed, cfg.size, [agent.goals[g]], N))
    all_actions = []
    for u in range(updates):
        if u % _RNG_BLOCK == 0:
            noise = torch.rand(_RNG_BLOCK, T, N, generator=gen)
        states, actions, rewards, dones, terms, boot = [], [], [], [], [], []
        for t in range(T):
            with torch.no_grad():
                logp, _ = model(torch.as_tensor(obs))
            cdf = logp.exp().cumsum(-1)
            action = (noise[u % _RNG_BLOCK, t][:, None] >= cdf).sum(-1).clamp(max=4).numpy()
            states.append(obs)
            actions.append(action)
            obs, reward, term, trunc, info = envs.step(action)
            final = np.where(info.get("_final_obs", np.zeros(N, bool)), info.get("final_obs", obs), obs)
            rewards.append(reward)
            terms.append(term)
            dones.append(term | trunc)
            boot.append(final.astype(np.int64))
        states_t = torch.as_tensor(np.array(states))  # (T, N)
        with torch.no_grad():
            next_v = model(torch.as_tensor(np.array(boot)).reshape(-1))[1].reshape(T, N)
        next_v = next_v * ~torch.as_tensor(np.array(terms))
        logp, values = model(states_t.reshape(-1))
        values = values.reshape(T, N)
        delta = torch.as_tensor(np.array(rewards), dtype=torch.float32) + cfg.gamma * next_v - values.detach()
        keep = cfg.gamma * cfg.gae_lambda * ~torch.as_tensor(np.array(dones))
        adv, running = torch.zeros(T, N), torch.zeros(N)
        for t in reversed(range(T)):
            running = delta[t] + keep[t] * running
            adv[t] = running
        returns = adv + values.detach()
        a = torch.as_tensor(np.array(actions)).reshape(-1)
        logp_a = logp.gather(1, a[:, None])[:, 0]
        entropy = -(logp.exp() * logp).sum(-1)
        loss = (-(adv.reshape(-1) * logp_a).mean() + cfg.vf_coef * ((returns - values) ** 2).mean()
                - cfg.ent_coef * entropy.mean())
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        opt.step()
        all_actions.append(np.array(actions))
    return np.array(all_actions), model


@pytest.mark.parametrize("overrides", [{}, {"random_start": True, "terminate_on_goal": False, "gae_lambda": 0.9,
                                           "learning_rate": 3e-3}])
def test_batched_a2c_equals_separate_agents(overrides):
    cfg = make_config(GenerateConfig, {"size": 3, "hidden": 16, "num_envs": 4, "num_steps": 5,
                                       "episode_length": 6, **overrides})
    goals, seed, updates = [(0, 0), (2, 1), (1, 2)], 7, 30
    agent = BatchedA2C(cfg, goals, seed, DARKROOM)
    agent._ref_gen_state = [gen.get_state() for gen in agent.gens]
    refs = [reference_run(cfg, agent, g, seed, updates) for g in range(len(goals))]
    actions = np.array([agent.step()[0].action for _ in range(updates)])  # (U, T, G*N)
    for g, (ref_actions, model) in enumerate(refs):
        np.testing.assert_array_equal(actions[:, :, g * cfg.num_envs:(g + 1) * cfg.num_envs], ref_actions)
        torch.testing.assert_close(agent.embed[g].detach().T, model.embed.weight.detach(), atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(agent.heads[g, :agent.A].detach(), model.actor.weight.detach(), atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(agent.bias[g, agent.A].detach(), model.critic.bias.detach()[0], atol=1e-5, rtol=1e-4)
    assert not torch.equal(agent.embed[0], agent.embed[1])  # agents are distinct


@pytest.mark.parametrize("random_start", [False, True])
def test_goal_history_does_not_depend_on_its_batch(random_start):
    cfg = make_config(GenerateConfig, {"size": 3, "hidden": 8, "num_envs": 2, "num_steps": 4,
                                       "random_start": random_start})
    alone = BatchedA2C(cfg, [(2, 2)], 1, DARKROOM)
    batched = BatchedA2C(cfg, [(0, 0), (2, 2)], 1, DARKROOM)
    for _ in range(20):
        a, _ = alone.step()
        b, _ = batched.step()
        np.testing.assert_array_equal(a.action, b.action[:, 2:])
        np.testing.assert_array_equal(a.state, b.state[:, 2:])
        np.testing.assert_array_equal(a.logprob, b.logprob[:, 2:])  # bit for bit (tests/test_darkroom_batching.py)
        np.testing.assert_array_equal(a.value, b.value[:, 2:])


def test_hand_written_gradients_equal_autograd():
    cfg = make_config(GenerateConfig, {"size": 4, "hidden": 12, "num_envs": 3, "num_steps": 5})
    agent = BatchedA2C(cfg, [(0, 0), (3, 1), (2, 3)], 3, DARKROOM)
    G, S, A = agent.G, agent.S, agent.A
    gen = torch.Generator().manual_seed(0)
    visits = torch.randint(0, 4, (G, S), generator=gen).float()  # (G, S) some cells unvisited
    adv_sum = torch.randn(G, A, S, generator=gen) * (visits[:, None] > 0)  # (G, A, S)
    ret_sum = torch.randn(G, S, generator=gen) * visits  # (G, S)
    ret_sq = ret_sum.pow(2).sum(1) + 1.0  # (G,)

    def table_loss(log_pi, values):
        return TableLoss(log_pi, values, adv_sum, visits, ret_sum, ret_sq, 15, cfg.vf_coef, cfg.ent_coef)

    h, log_pi, values = agent._forward()
    agent._backward(h, *table_loss(log_pi, values).grads())

    params = [p.detach().clone().requires_grad_() for p in agent.params]  # embed, heads, bias
    embed, heads, bias = params
    out = torch.bmm(heads, F.relu(embed)) + bias[:, :, None]  # (G, A+1, S)
    stats = table_loss(F.log_softmax(out[:, :A], dim=1), out[:, A]).stats()
    stats["loss"].sum().backward()
    for p, ref in zip(agent.params, params):
        torch.testing.assert_close(p.grad, ref.grad, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(table_loss(log_pi, values).stats()["loss"], stats["loss"].detach())
