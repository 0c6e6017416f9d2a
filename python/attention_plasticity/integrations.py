"""Training frameworks: ``PlasticityCallback``, an ``ap.PlasticityMonitor`` inside transformers'
``Trainer`` (issue 35). transformers is imported when the callback is made, not before."""

__all__ = ["PlasticityCallback"]


def _callback_base():
    try:
        from transformers import TrainerCallback
    except ImportError as exc:  # pragma: no cover
        raise ImportError("ap.integrations.PlasticityCallback needs transformers (pip install transformers)") from exc
    return TrainerCallback


def PlasticityCallback(monitor, *, on="steps", observe_at_start=True, attach_to=None):
    """A ``transformers.TrainerCallback`` that runs ``monitor`` (an ``ap.PlasticityMonitor``) in a
    Trainer and puts its scalars in the Trainer's logs.

    ``on``: ``"steps"`` (default) observes at the end of each optimizer step the monitor finds due
    (``every``; with gradient accumulation a step is an optimizer step, ``state.global_step``);
    ``"save"`` observes at each checkpoint save, ``"evaluate"`` at each evaluation (then
    ``every`` is not used: each of those steps is observed). ``observe_at_start``: observe the
    model at step 0, before the first update (the baseline of the changes against the first).

    The scalars (``monitor.scalars()``: ``plasticity/ap_overall_mean``, ``plasticity/ap_drop_mean``,
    ``plasticity/heads_changed``, ... and ``plasticity/step``, the step observed) of each finished
    observation are added to the next ``logs`` the Trainer emits (``on_log``: its log_history entry
    too), so the reporting integrations (TensorBoard, W&B, MLflow) show them if they run after this
    callback: give the Trainer this callback with ``attach_to=trainer`` (or call
    ``callback.attach(trainer)``), which puts it first among the Trainer's callbacks. With
    ``background=True`` an observation's scalars come with the first log after its analysis
    finished; the final log of training (``train_runtime``) waits for the pending one.

    At the end of training (``on_train_end``) the monitor is closed (its last observation flushed).
    Training is unchanged: see PlasticityMonitor (eval mode, no gradients, the random states and
    the modules' modes restored; nothing of the optimizer, the data order or the control flow).
    """
    if on not in ("steps", "save", "evaluate"):
        raise ValueError(f"PlasticityCallback: on {on!r}: use 'steps', 'save' or 'evaluate'")
    base = _callback_base()

    class _PlasticityCallback(base):
        __doc__ = PlasticityCallback.__doc__

        def __init__(self):
            self.monitor = monitor
            self.on = on
            self.observe_at_start = bool(observe_at_start)
            self._waiting = []

        def attach(self, trainer):
            """Puts this callback first among ``trainer``'s callbacks (before the reporting
            integrations, so that they log the scalars it adds). Returns the trainer."""
            callbacks = trainer.callback_handler.callbacks
            if self in callbacks:
                callbacks.remove(self)
            callbacks.insert(0, self)
            return trainer

        def _observe(self, model, step, force):
            if model is None:
                return
            if force:
                if self.monitor.active and (not self.monitor.steps or step > self.monitor.steps[-1]):
                    self.monitor.observe(model, step, force=True)
            else:
                self.monitor.observe(model, step)

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            if self.observe_at_start and state.global_step == 0:
                self._observe(model, 0, True)

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if self.on == "steps":
                self._observe(model, state.global_step, False)

        def on_save(self, args, state, control, model=None, **kwargs):
            if self.on == "save":
                self._observe(model, state.global_step, True)

        def on_evaluate(self, args, state, control, model=None, **kwargs):
            if self.on == "evaluate":
                self._observe(model, state.global_step, True)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs is None or not self.monitor.active:
                return
            if "train_runtime" in logs:
                self.monitor.wait()  # the last log of training: flush the pending observation
            observations = self.monitor.take_unlogged()
            if not observations:
                return
            added = dict(self.monitor.scalars(observations[-1]))
            added["plasticity/step"] = observations[-1].step
            logs.update(added)
            if state.log_history and state.log_history[-1].get("step") == state.global_step:
                state.log_history[-1].update(added)

        def on_train_end(self, args, state, control, **kwargs):
            self.monitor.close()

    callback = _PlasticityCallback()
    if attach_to is not None:
        callback.attach(attach_to)
    return callback
