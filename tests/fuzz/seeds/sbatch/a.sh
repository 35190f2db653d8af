#!/bin/bash
#SBATCH -J fuzz -N 2-4 --ntasks-per-node=4 -c 2
#SBATCH --mem=4G --time=1:00:00 -p batch,gpu
#SBATCH --array=0-99:3%5 --dependency=afterok:12:13?afterany:14_2
#SBATCH --gres=gpu:a100:2 --constraint="intel&(ib|opa)" -L matlab:2
#SBATCH -o out-%A_%a.txt --export=ALL,FOO=bar --begin=now+60
#SBATCH --exclusive=topo --switches=2@10:00 --nice=10
srun hostname
